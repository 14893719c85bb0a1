#!/usr/bin/env python3
"""The page at GET / in a real browser (Debian's headless chromium, driven by chromedriver
through Selenium): it shows the model, classifies pasted texts with their labels and scores
(the same as POST /predict), compares texts by their embeddings (the same as POST /embed),
ranks texts against a query with a pair classifier (the same as POST /rerank), and shows the
server's error message for a text that is too long.
Usage: LINFORMER_BIN=build/linformer test_page.py"""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_util as su  # noqa: E402

from selenium import webdriver  # Debian: python3-selenium
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait


class Page(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.root = tempfile.mkdtemp(prefix="lf_page_test_")
        cls.server = su.Server(su.make_classifier(cls.root, "single"))
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-quic", "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync",
                     f"--user-data-dir={cls.root}/profile"]:
            opts.add_argument(flag)
        cls.browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        cls.browser.set_page_load_timeout(60)
        cls.wait = WebDriverWait(cls.browser, 60)

    @classmethod
    def tearDownClass(cls):
        cls.browser.quit()
        cls.server.close()
        shutil.rmtree(cls.root, ignore_errors=True)

    def open(self, texts):
        self.browser.get(f"http://127.0.0.1:{self.server.port}/")
        self.wait.until(EC.text_to_be_present_in_element((By.ID, "info"), "classifier"))
        box = self.browser.find_element(By.ID, "texts")
        box.clear()
        box.send_keys("\n".join(texts))

    def test_classify(self):
        texts = ["the movie was good", "really bad acting", "it was very good film"]
        self.open(texts)
        self.browser.find_element(By.ID, "classify").click()
        self.wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "tr.prediction")) == 3)
        status, ref = self.server.post("/predict", {"inputs": [[t] for t in texts]})
        rows = self.browser.find_elements(By.CSS_SELECTOR, "tr.prediction")
        for row, preds in zip(rows, ref):
            self.assertEqual(row.find_element(By.CSS_SELECTOR, ".label").text, preds[0]["label"])
            shown = {d.get_attribute("data-label"): float(d.get_attribute("data-score"))
                     for d in row.find_elements(By.CSS_SELECTOR, ".score")}
            self.assertEqual(set(shown), {"negative", "positive"})
            for p in preds:
                self.assertAlmostEqual(shown[p["label"]], p["score"], places=6)
        self.assertIn("positive", rows[0].text + rows[2].text)

    def test_compare(self):
        texts = ["the movie was good", "the movie was good", "bad"]
        self.open(texts)
        self.browser.find_element(By.ID, "embed").click()
        self.wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#similarity td.sim")) == 9)
        sims = [float(td.text) for td in self.browser.find_elements(By.CSS_SELECTOR, "#similarity td.sim")]
        status, vecs = self.server.post("/embed", {"inputs": texts})
        for i in range(3):
            for j in range(3):
                dot = sum(a * b for a, b in zip(vecs[i], vecs[j]))
                self.assertAlmostEqual(sims[3 * i + j], dot, places=3)
        self.assertAlmostEqual(sims[1], 1.0, places=3)  # the same text twice

    def test_rerank(self):
        self.open(["a query", "a text"])
        self.assertFalse(self.browser.find_element(By.ID, "rerank").is_enabled())  # single-text model
        pairs = su.Server(su.make_classifier(self.root, "pairs", pairs=True))
        try:
            lines = ["the plot", "it was good", "really bad acting", "good good film"]
            self.browser.get(f"http://127.0.0.1:{pairs.port}/")
            self.wait.until(lambda b: b.find_element(By.ID, "rerank").is_enabled())
            box = self.browser.find_element(By.ID, "texts")
            box.clear()
            box.send_keys("\n".join(lines))
            self.browser.find_element(By.ID, "rerank").click()
            self.wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "tr.rank")) == 3)
            status, ref = pairs.post("/rerank", {"query": lines[0], "texts": lines[1:]})
            rows = self.browser.find_elements(By.CSS_SELECTOR, "tr.rank")
            for row, r in zip(rows, ref):
                cells = row.find_elements(By.TAG_NAME, "td")
                self.assertEqual(cells[1].text, lines[1 + r["index"]])
                self.assertAlmostEqual(float(cells[2].text), r["score"], places=4)
        finally:
            pairs.close()

    def test_error_is_shown(self):
        self.open([" ".join(["good"] * 200)])
        self.browser.find_element(By.ID, "embed").click()
        self.wait.until(EC.text_to_be_present_in_element((By.ID, "error"), "422"))
        self.assertIn("--max-input-length", self.browser.find_element(By.ID, "error").text)


if __name__ == "__main__":
    if not su.BIN:
        sys.exit("set LINFORMER_BIN to the linformer program")
    unittest.main()
