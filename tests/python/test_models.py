"""Installed models by name: Model("name") and linformer.models() find the folders of the
model search path (LINFORMER_MODELS first), as `linformer models` does (docs/models.md)."""
import json
import shutil

import numpy as np
import pytest

import linformer
from conftest import run_cli


@pytest.fixture()
def installed(tmp_path, monkeypatch, tiny_model, classifier):
    root = tmp_path / "models"
    root.mkdir()
    shutil.copytree(tiny_model, root / "tiny-mini")
    shutil.copytree(classifier, root / "sentiment-mini")
    monkeypatch.setenv("LINFORMER_MODELS", str(root))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return root


def test_a_bare_name_loads_the_installed_folder(installed, classifier):
    by_name = linformer.Model("sentiment-mini")
    by_path = linformer.Model(classifier)
    assert by_name.labels == by_path.labels
    texts = ["a good film", "a bad film"]
    np.testing.assert_array_equal(by_name.embed(texts), by_path.embed(texts))


def test_models_lists_what_the_program_lists(installed):
    listed = linformer.models()
    assert [m["name"] for m in listed[:2]] == ["sentiment-mini", "tiny-mini"]
    tiny = listed[1]
    assert tiny["path"] == str(installed / "tiny-mini")
    assert tiny["max_len"] == 16 and tiny["attention"] == "linformer" and tiny["bytes"] > 0
    cli = json.loads(run_cli("models", "--json")[0])
    assert [(m["name"], m["path"], m["max_len"], m["bytes"]) for m in cli[:2]] == \
        [(m["name"], m["path"], m["max_len"], m["bytes"]) for m in listed[:2]]


def test_an_unknown_name_lists_the_installed_models(installed):
    with pytest.raises(FileNotFoundError, match="installed models: sentiment-mini, tiny-mini"):
        linformer.Model("linformer-huge")


def test_a_run_folder_loads_its_best_model(classifier):
    import os
    run = os.path.dirname(classifier)  # RUN/best -> RUN
    by_run = linformer.Model(run)
    by_best = linformer.Model(classifier)
    texts = ["a good film", "a bad film"]
    np.testing.assert_array_equal(by_run.embed(texts), by_best.embed(texts))
