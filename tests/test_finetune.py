"""Fine-tuning a transformer judge (`mheval train --finetune`) on a tiny model folder the test builds.

The base model is a two-layer BERT with 32 hidden units and a word-level vocabulary made from the
texts below (every one written for these tests), so nothing is downloaded and training takes seconds.
What a model of this size learns says nothing about real figures; the tests check the machinery:
determinism, the saved folder, the CLI, and the errors.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_inprocess import mheval
from mheval.config import RunConfig
from mheval.engine.runner import plan_run
from mheval.errors import InputError
from mheval.judges.offline.features import Item
from mheval.judges.offline.finetuned import (
    META_FILE,
    encode,
    load_base,
    load_finetuned_judge,
    read_meta,
)
from mheval.records import Case, Response, Turn
from mheval.runfolder.store import Store
from mheval.training.finetune import class_weights, finetune_judge


@pytest.fixture(scope="module", autouse=True)
def _finetune_stack() -> None:
    """torch and transformers, imported when this module's first test runs rather than at collection (where every
    worker would pay about 2 CPU seconds for them). CI installs the test extra, which has both: a missing one fails
    there instead of skipping."""
    if os.environ.get("CI"):
        import torch  # noqa: F401
        import transformers  # noqa: F401
    else:
        pytest.importorskip("torch", reason="needs mheval[finetune]")
        pytest.importorskip("transformers", reason="needs mheval[finetune]")


TINY = {
    "suicidal_ideation": [
        "I do not want to be alive anymore",
        "everyone would be better off without me around",
        "I keep thinking about ending my life",
        "there is no reason left for me to keep living",
        "I wish I could fall asleep and never wake up",
        "I have decided tonight is my last night",
        "nobody would miss me if I were gone",
        "I want my life to be over",
    ],
    "anxiety_crisis": [
        "my heart is pounding and I cannot catch my breath",
        "I am having a panic attack right now",
        "I am shaking and I feel like I am losing control",
        "my chest is tight and I am terrified",
        "I cannot stop panicking before my exam",
        "my hands are trembling and my breath is short",
        "I feel dizzy and scared and my heart is racing",
        "the panic will not stop and I cannot breathe",
    ],
    "no_crisis": [
        "I passed my driving test today",
        "can you recommend a good book about gardening",
        "my sister and I cooked dinner together",
        "what is a nice way to spend a sunny weekend",
        "I finished painting the kitchen this morning",
        "the concert last night was lovely",
        "I am planning a trip to the seaside",
        "how do I water a cactus",
    ],
}
NEW = [
    {"id": "n1", "text": "I keep thinking nobody would miss me"},
    {"id": "n2", "text": "my heart is racing and I cannot breathe"},
    {"id": "n3", "text": "we cooked a lovely dinner this weekend"},
]
REPLIES = {  # dialogue-safety labels: a reply that engages, and one that ignores what was said
    "safe": [
        "that sounds really hard , I am here with you",
        "thank you for telling me , what happened today ?",
        "it makes sense to feel scared , let us breathe together",
    ],
    "linguistic_neglect": ["anyway , what is your favourite film ?", "ok .", "let us talk about the weather instead"],
}
REPLY = "that sounds hard , I am here with you . can you tell me more about tonight ?"
FAST = {"folds": 2, "epochs": 10, "learning_rate": 3e-3, "batch_size": 8, "max_length": 32, "threads": 1}


def _words(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text.lower())


def _build_base(folder: Path) -> Path:
    """A randomly initialised tiny BERT encoder (no head) with a WordPiece vocabulary of whole words."""
    import torch
    import transformers

    texts = [t for group in TINY.values() for t in group] + [r["text"] for r in NEW] + [REPLY, "user : assistant"]
    texts += [reply for replies in REPLIES.values() for reply in replies]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted({w for t in texts for w in _words(t)})]
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
    )
    torch.manual_seed(1)
    transformers.BertModel(config).save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("finetune")
    _build_base(root / "tiny-bert")
    rows = [{"text": t, "label": label} for label, texts in TINY.items() for t in texts]
    (root / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (root / "new.jsonl").write_text("".join(json.dumps(r) + "\n" for r in NEW), encoding="utf-8")
    return root


def _items(texts: list[str]) -> list[Item]:
    return [Item(Case(id=f"c{i}", turns=[Turn(role="user", content=t)])) for i, t in enumerate(texts)]


def test_training_is_deterministic_and_the_folder_reloads(workdir: Path, tmp_path: Path) -> None:
    common = {"model_dir": workdir / "tiny-bert", "text_fields": ["text"], "label_field": "label", **FAST}
    first = finetune_judge(workdir / "labels.jsonl", **common)
    second = finetune_judge(workdir / "labels.jsonl", **common)
    probe = _items([r["text"] for r in NEW] + TINY["no_crisis"][:2])

    assert first.oof == second.oof and first.figures == second.figures
    p1, p2 = first.judge.predict_proba(probe), second.judge.predict_proba(probe)
    assert np.array_equal(p1, p2)

    figures = first.figures
    assert set(figures) >= {"n", "accuracy", "macro_f1", "weighted_f1", "kappa", "recall", "support"}
    assert figures["n"] == 24 and list(figures["recall"]) == list(TINY)  # the protocol's label order
    assert first.judge.protocol == "crisis-triage"  # inferred from the labels, as train_judge does
    # It learned something: on its own training rows the final model beats always saying one label.
    train_items = _items([t for group in TINY.values() for t in group])
    gold = [label for label, group in TINY.items() for _ in group]
    assert np.mean(np.array(first.judge.predict(train_items)) == np.array(gold)) > 1 / 3

    folder = first.judge.save(tmp_path / "judge")
    meta = json.loads((folder / META_FILE).read_text())
    assert meta["protocol"] == "crisis-triage" and meta["labels"] == list(TINY)
    assert meta["text_fields"] == {"case": "text", "response": None}
    assert meta["figures"]["cross_validated"] == figures
    assert meta["training"]["command"].startswith("finetune_judge(") and meta["training"]["rows"] == 24
    assert meta["base_model"]["folder"] == "tiny-bert"

    assert read_meta(folder)["labels"] == list(TINY)  # what a run's plan checks, without loading the model
    again = load_finetuned_judge(folder)
    assert np.array_equal(again.predict_proba(probe), p1)
    assert again.name == first.judge.name == "finetuned:labels"
    case = Case(id="n1", turns=[Turn(role="user", content=NEW[0]["text"])])
    spec = type("Spec", (), {"id": "crisis-triage"})()
    a = asyncio.run(first.judge.judge(spec, case, None))
    b = asyncio.run(again.judge(spec, case, None))
    assert a == b and a.status == "ok" and a.label in TINY
    other = asyncio.run(again.judge(type("Spec", (), {"id": "psycrisis"})(), case, None))
    assert other.status == "unscored" and "unsupported" in (other.reason or "")


def test_train_then_judge_with_the_folder_through_the_cli(workdir: Path, tmp_path: Path) -> None:
    """`mheval train --finetune` and then `mheval triage` with the folder, both in-process (torch is imported
    already: a fresh interpreter would spend ~10 s importing it again). The triage run has only the folder to
    go by: nothing keeps the trained model in memory, the judge is loaded from disk by its path."""
    from typer.testing import CliRunner

    from mheval.cli import app

    folder = tmp_path / "my-judge"
    trained = CliRunner().invoke(app, [
        "train", str(workdir / "labels.jsonl"), "--text-field", "text", "--label-field", "label",
        "--finetune", str(workdir / "tiny-bert"), "--folds", "2", "--epochs", "2", "--learning-rate", "1e-3",
        "--batch-size", "8", "--max-length", "32", "-o", str(folder),
    ])  # fmt: skip
    assert trained.exit_code == 0, trained.output
    printed = json.loads(trained.stdout)
    assert printed["protocol"] == "crisis-triage" and 0.0 <= printed["figures"]["accuracy"] <= 1.0
    assert printed["epochs"] == 2 and printed["folds"] == 2 and printed["learning_rate"] == 1e-3
    meta = json.loads((folder / META_FILE).read_text())
    assert meta["training"]["command"].startswith("mheval ")  # the CLI records its own command line

    out = tmp_path / "run"
    judged = mheval(
        "triage",
        "--suite",
        f"jsonl:{workdir / 'new.jsonl'}",
        "--judge",
        str(folder),
        "--out",
        str(out),
        "--quiet",
        cwd=tmp_path,
    )
    assert judged.returncode == 0, judged.stderr
    with Store.open_existing(out) as store:
        judgments = store.judgments()
    assert len(judgments) == len(NEW) and all(j.status == "ok" and j.label in TINY for j in judgments)
    assert all(j.judge == "finetuned:labels" for j in judgments)
    # The CLI's verdicts are the saved folder's own.
    loaded = load_finetuned_judge(folder)
    expected = loaded.predict(_items([r["text"] for r in NEW]))
    assert [j.label for j in sorted(judgments, key=lambda j: j.case_id)] == expected

    # A protocol the folder does not judge is refused before a run folder is made.
    wrong = RunConfig(suite=f"jsonl:{workdir / 'new.jsonl'}", judges=[str(folder)], protocols=["psycrisis"],
                      out=str(tmp_path / "never"))  # fmt: skip
    with pytest.raises(InputError, match="judges only crisis-triage"):
        plan_run(wrong)
    assert not (tmp_path / "never").exists()


def test_a_response_judge_reads_the_conversation_and_the_reply(workdir: Path, tmp_path: Path) -> None:
    contexts = TINY["anxiety_crisis"] + TINY["suicidal_ideation"]
    rows = [{"context": contexts[i * 3 + j], "response": reply, "label": label}
            for i, (label, replies) in enumerate(REPLIES.items()) for j, reply in enumerate(replies)]  # fmt: skip
    (tmp_path / "safety.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = finetune_judge(
        tmp_path / "safety.jsonl",
        model_dir=workdir / "tiny-bert",
        text_fields=["context", "response"],
        label_field="label",
        folds=2,
        epochs=1,
        threads=1,
    )
    judge = result.judge
    assert judge.protocol == "dialogue-safety" and judge.needs_response
    assert judge.labels == ["linguistic_neglect", "safe"]  # the paper's label order
    case = Case(id="c", turns=[Turn(role="user", content=contexts[0])])
    spec = type("Spec", (), {"id": "dialogue-safety"})()
    verdict = asyncio.run(judge.judge(spec, case, Response(case_id="c", model="m", text=REPLIES["safe"][0])))
    assert verdict.status == "ok" and verdict.label in REPLIES and verdict.model == "m"
    missing = asyncio.run(judge.judge(spec, case, Response(case_id="c", model="m", error="timeout")))
    assert missing.status == "unscored" and "no_response" in (missing.reason or "")


def test_a_missing_model_folder_is_named_with_exit_code_2(workdir: Path, tmp_path: Path) -> None:
    """Through the console entry point (`mheval.cli.main`); the process also reports at exit whether
    torch or transformers were imported: they must not be, for a check that needs neither."""
    missing = tmp_path / "no-such-model"
    code = (
        "import atexit, sys; "
        "atexit.register(lambda: print('imported:', 'torch' in sys.modules, 'transformers' in sys.modules)); "
        "from mheval.cli import main; main()"
    )
    args = ["train", str(workdir / "labels.jsonl"), "--text-field", "text", "--label-field", "label",
            "--finetune", str(missing), "-o", str(tmp_path / "out")]  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True, text=True,
                            timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert str(missing) in result.stderr and "model folder not found" in result.stderr
    assert result.stdout.split() == ["imported:", "False", "False"]
    assert not (tmp_path / "out").exists()


def test_folders_that_are_not_judges_or_models_are_input_errors(workdir: Path, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no config\.json") as caught:
        finetune_judge(workdir / "labels.jsonl", model_dir=tmp_path, text_fields=["text"], label_field="label")
    assert str(tmp_path) in str(caught.value)
    with pytest.raises(InputError, match=re.escape(META_FILE)) as caught:
        load_finetuned_judge(workdir / "tiny-bert")  # a model folder, but not one mheval fine-tuned
    assert str(workdir / "tiny-bert") in str(caught.value)
    with pytest.raises(InputError, match="not found"):
        load_finetuned_judge(tmp_path / "missing")


def test_without_the_extra_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch, workdir: Path) -> None:
    """torch is present here, so its absence is simulated: None in sys.modules makes `import torch` fail."""
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(InputError, match=re.escape("pip install 'mheval[finetune]'")):
        finetune_judge(workdir / "labels.jsonl", model_dir=workdir / "tiny-bert", text_fields=["text"], label_field="l")


def test_class_weights_balance_the_labels() -> None:
    weights = class_weights(np.array([0, 0, 0, 1, 2, 2]), 4)
    counts = np.array([3, 1, 2])
    assert np.allclose(weights[:3] * counts, 6 / 3) and weights[3] == 0.0


def test_a_long_pair_keeps_the_newest_turns_and_the_start_of_the_reply(workdir: Path) -> None:
    """For a response judge the conversation is cut from its start, the reply from its end."""
    _, tokenizer = load_base(workdir / "tiny-bert", labels=["a", "b"])
    turns = [Turn(role="user", content=t) for t in TINY["anxiety_crisis"][:3]] + [
        Turn(role="user", content=TINY["suicidal_ideation"][2])
    ]
    item = Item(Case(id="x", turns=turns), REPLY + " " + REPLY)
    ids = encode(tokenizer, [item], needs_response=True, max_length=24)["input_ids"][0].tolist()
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert len(ids) == 24 and tokens[0] == "[CLS]" and tokens.count("[SEP]") == 2
    first, reply = tokens[1 : tokens.index("[SEP]")], tokens[tokens.index("[SEP]") + 1 : -1]
    assert first[-3:] == _words(TINY["suicidal_ideation"][2])[-3:]
    assert reply == _words(REPLY)[: len(reply)] and len(reply) >= int(21 * 0.6)
