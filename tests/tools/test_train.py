"""Training reproduces a checkpoint: the corpus builds from the standard library, and a few steps learn."""
from __future__ import annotations

import json

import torch

from tinyserve.core.tokenizer import BOS, EOS
from tinyserve.model.runner import load_model
from tinyserve.tools.train import corpus_documents, token_stream, train


def test_the_corpus_is_documents_of_python_source_each_framed_by_bos_and_eos():
    docs = corpus_documents(max_files=40)
    assert len(docs) > 50
    assert all(20 <= len(d.encode()) <= 3001 and d.endswith("\n") for d in docs)
    assert any(d.startswith("def ") for d in docs) and any(d.startswith("class ") for d in docs)
    assert corpus_documents(max_files=40) == docs  # a fixed order: reproducible
    ids = token_stream(docs, seed=0)
    assert int((ids == BOS).sum()) == int((ids == EOS).sum()) == len(docs)
    assert ids[0] == BOS and ids[-1] == EOS


def test_a_few_training_steps_lower_the_loss_and_write_a_loadable_checkpoint(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        stats = train(minutes=2, steps=40, out=tmp_path, batch=8, block=64, max_files=30, log_every=10**6,
                      sample_tokens=8)
    finally:
        torch.set_num_threads(threads)
    assert stats["steps"] == 40
    assert stats["train_loss"] < stats["first_loss"] - 0.5  # from ~ln(258) = 5.55 down
    assert json.loads((tmp_path / "training.json").read_text())["steps"] == 40
    model = load_model(tmp_path, device="cpu")
    assert len(model.generate([BOS, 100], 5, stop_at_eos=False)) == 5
