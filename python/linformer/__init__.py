"""Linformer encoders from Python: numpy arrays in and out, the C++ engine underneath.

    import linformer
    m = linformer.Model("runs/sst2/best")            # a model folder
    m.predict(["a gripping , beautiful film"])       # [{'label': 'positive', 'probs': {...}}]
    vecs = m.embed(["some text", "more text"], pooling="mean", normalize=True)
    ids, mask = m.tokenize(["some text"])
    out = m.forward(ids, mask)                        # {'hidden_states': ..., 'mlm_logits': ...}

    linformer.pretrain(train="corpus.txt", config="configs/small-linformer.json", out="runs/mlm")
    linformer.finetune(init_from="runs/mlm/model", train="train.tsv", dev="dev.tsv",
                       out="runs/cls", epochs=3)

Classes: Model, Tokenizer. Functions: init, pretrain, finetune. Every compute call releases
the GIL; one Model serialises its calls (two Models run in parallel). Missing files raise
FileNotFoundError, bad arguments ValueError, other engine errors RuntimeError, each with the
engine's message. docs/python.md has the whole story.
"""

from ._ext import Model, Tokenizer, auto_precision, cpu_paths, init, models, precisions
from . import _ext

__all__ = ["Model", "Tokenizer", "auto_precision", "cpu_paths", "init", "models", "precisions", "pretrain",
           "finetune"]
__version__ = "0.1.0"


def _options_doc(defaults):
    def show(v):
        return f"{v:.6g}" if isinstance(v, float) else repr(v)
    return "\n".join(f"    {k} = {show(v)}" for k, v in sorted(defaults.items()))


def pretrain(*, resume=False, callback=None, threads=None, **options):
    return _ext._pretrain(options, resume, callback, threads)


def finetune(*, resume=False, callback=None, threads=None, **options):
    return _ext._finetune(options, resume, callback, threads)


_TRAIN_DOC = """{what}

Every option of `linformer {cmd}` is a keyword argument of the same name with
underscores (--batch-size -> batch_size); values and checks are the command's.
resume=True continues the run in `out` from its newest checkpoint, exactly; its options come
from the run, except time_limit and precision when given (that call runs in them).

callback   None: progress lines are printed on stderr, as the command prints them.
           A function: called with each record the run appends to RUN/metrics.jsonl
           (a dict: step, split ("train" or the evaluation's), loss, lr, {speed} ...),
           and the printing is off unless quiet=False is given.
threads    None, or the OpenMP thread count for the run.

Ctrl-C (KeyboardInterrupt) or an exception raised by the callback stops the run at the
end of the current step with a checkpoint (the run folder stays complete; resume=True
continues it), then is raised. Returns the run's final metrics as a dict ({result}).

Options and their defaults:
{options}
"""

pretrain.__doc__ = _TRAIN_DOC.format(
    what="Masked-language-model pretraining on plain text (as `linformer pretrain`).",
    cmd="pretrain", speed="tokens_per_s",
    result="steps_done, stopped, final_train_loss, final_valid_loss, final_valid_ppl "
           "(None when resuming a run that had already finished: nothing ran), "
           "seconds, tokens_per_second, out",
    options=_options_doc(_ext._pretrain_defaults()))
finetune.__doc__ = _TRAIN_DOC.format(
    what="Finetune a text classifier (as `linformer finetune`); the best model on the dev "
         "data is kept in OUT/best, the final one in OUT/model.",
    cmd="finetune", speed="examples_per_s, accuracy",
    result="steps_done, total_steps, stopped, metric, best_metric, best_step, best_epoch, "
           "last_dev, seconds, examples_per_second, out",
    options=_options_doc(_ext._finetune_defaults()))
