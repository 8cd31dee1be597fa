"""Every loader and parser under a seeded mutation fuzzer: each outcome is a valid load
(and use) or a documented error (a ``TensorCodeError``), never another exception, never
a hang. The artifacts are small and made once per module; each case rewrites one file
of a copy and loads it, so a case costs about a millisecond. Calls run on the reference
backend: no plan is compiled per case.

The counts per surface (cases, documented, valid) are printed in the test summary
(``tests/conftest.py`` gathers them), so a regression is visible in every run.
"""

from __future__ import annotations

import pathlib
import shutil
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from loader_fuzzing import (
    CASES,
    FEATURES,
    INPUTS,
    OUTPUTS,
    PARAMETERS,
    PROGRAM,
    REF,
    check,
    mutate_json,
    mutate_safetensors,
    run_cases,
    weights_base,
)

import tensorcode as tc
from tensorcode.errors import TensorCodeError


class Artifact:
    """A valid artifact's files, copied once into a case directory; each case rewrites
    one file there (chosen by the seed) and puts the original back afterwards."""

    def __init__(self, source: pathlib.Path, work: pathlib.Path,
                 weights: dict[str, float] | None = None) -> None:
        shutil.copytree(source, work) if source.is_dir() else (
            work.mkdir(), shutil.copy(source, work / source.name))
        self.work = work
        self.originals = {p.name: p.read_bytes() for p in sorted(work.iterdir())}
        self.weights = weights or dict.fromkeys(self.originals, 1.0)

    def mutate(self, rng: Any) -> tuple[str, bytes]:
        names = list(self.weights)
        name = rng.choices(names, [self.weights[n] for n in names])[0]
        data = self.originals[name]
        if name.endswith(".safetensors"):
            return name, mutate_safetensors(data, rng)
        return name, mutate_json(data, rng)

    def attempt(self, load: Callable[[pathlib.Path], Any]) -> Callable[[tuple[str, bytes]], Any]:
        def run(case: tuple[str, bytes]) -> Any:
            name, data = case
            path = self.work / name
            _rewrite(path, data)
            try:
                return load(self.work)
            finally:
                _rewrite(path, self.originals[name])
        return run


def _rewrite(path: pathlib.Path, data: bytes) -> None:
    """A new file under ``path`` (unlinked first: truncating a written file in place
    costs milliseconds on some filesystems, a new one microseconds)."""
    path.unlink()
    path.write_bytes(data)


# -- tools ----------------------------------------------------------------------------------
def test_tool_from_pretrained(tmp_path, record_property):
    from tensorcode.tools import Decision

    tool = Decision(dim=2, hidden=2, buckets=8, backend=REF)
    artifact = Artifact(tool.save_pretrained(tmp_path / "tool"), tmp_path / "case")
    tally = run_cases("Tool.from_pretrained", CASES, 29, artifact.mutate, artifact.attempt(
        lambda d: Decision.from_pretrained(d, backend=REF)))
    check(tally, record_property)


# -- checkpoints ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def trained():
    tape = tc.Tape()
    tc.nn.Mlp(tape, [2, 3, 1], "tanh", tc.init.xavier(3))
    network = tape.into_network()
    parameters = network.parameters()
    optimizer = tc.optim.Adam()
    optimizer.bind(parameters.layout)
    return network, parameters, optimizer


def _load_checkpoint(network, path):
    optimizer = tc.optim.Adam()
    optimizer.bind(network.layout)
    return tc.checkpoint.load(path, network.parameters(), optimizer,
                              generator=tc.random.Generator(0))


def test_checkpoint_directory(tmp_path, trained, record_property):
    network, parameters, optimizer = trained
    tc.checkpoint.save(tmp_path / "ckpt", parameters, optimizer, steps=3,
                       progress={"epoch": 1}, generator=tc.random.Generator(5))
    artifact = Artifact(tmp_path / "ckpt", tmp_path / "case")
    tally = run_cases("checkpoint.load (directory)", CASES, 29, artifact.mutate,
                      artifact.attempt(lambda d: _load_checkpoint(network, d)))
    check(tally, record_property)


def test_checkpoint_single_file(tmp_path, trained, record_property):
    network, parameters, optimizer = trained
    path = tc.checkpoint.save_file(tmp_path / "one.safetensors", parameters, optimizer,
                                   steps=3, progress={"epoch": 1},
                                   generator=tc.random.Generator(5))
    artifact = Artifact(path, tmp_path / "case")
    tally = run_cases("checkpoint.load (single file)", CASES, 29, artifact.mutate,
                      artifact.attempt(lambda d: _load_checkpoint(network, d / path.name)))
    check(tally, record_property)


# -- algorithms and distillations --------------------------------------------
def test_algorithm_load_and_call(tmp_path, record_property):
    import tensorcode.algorithm as algorithms
    from tensorcode.algorithm import Algorithm

    algorithm = algorithms.compile(PROGRAM, INPUTS, OUTPUTS, PARAMETERS, executor=REF)
    algorithm(FEATURES)
    artifact = Artifact(algorithm.save(tmp_path / "router.json"), tmp_path / "case")
    tally = run_cases("Algorithm.load + call", CASES, 29, artifact.mutate, artifact.attempt(
        lambda d: Algorithm.load(d / "router.json", executor=REF)(FEATURES)))
    check(tally, record_property)


def test_distillation_load_and_call(tmp_path, record_property):
    from tensorcode.distill import CaseSet, Distillation
    from tensorcode.distill.program import compile_program

    outputs = {"route": ()}
    program, abstains = compile_program(PROGRAM, PARAMETERS, INPUTS, outputs, REF)
    cases = CaseSet([0], [FEATURES], [{"route": np.array(1.0)}])
    distillation = Distillation(task="route", inputs=INPUTS, outputs=outputs, program=program,
                                source=PROGRAM, report={"design": {}, "acceptance": {}},
                                attempts=[], design=cases, acceptance=cases, settings={},
                                abstains=abstains)
    directory = distillation.save(tmp_path / "distilled")
    artifact = Artifact(directory, tmp_path / "case")
    tally = run_cases("Distillation.load + call", CASES, 29, artifact.mutate, artifact.attempt(
        lambda d: Distillation.load(d, executor=REF)(FEATURES)))
    check(tally, record_property)


# -- weights --------------------------------------------------------------------------------
def test_patch_load_and_apply(tmp_path, record_property):
    from tensorcode.weights import LowRank, Patch, Projection, build

    base = weights_base()
    rng = np.random.default_rng(1)
    edited_i = base["i"].copy()
    edited_i[1] = -7
    patch = build(base, {"w": LowRank(rng.normal(size=(3, 1)), rng.normal(size=(1, 4))),
                         "w2": Projection(rng.normal(size=5), 0.5, axis=1, span=(0, 2)),
                         "h": np.array([0.5, 0, 0], np.float16), "i": edited_i,
                         "m": np.array([False, False])},
                  rationale="every form", evidence=[{"source": "test", "n": 1}])
    patch.save(tmp_path / "fix.patch.json")
    artifact = Artifact(tmp_path / "fix.patch.json", tmp_path / "case")
    tally = run_cases("Patch.load + apply", CASES, 29, artifact.mutate, artifact.attempt(
        lambda d: Patch.load(d / "fix.patch.json").apply(base)))
    check(tally, record_property)


# -- GPT-2 ----------------------------------------------------------------------------------
def test_gpt2_load(tmp_path, record_property):
    from tensorcode.models import gpt2
    from tensorcode.nn.transformer import GptConfig

    config = GptConfig(vocab_size=11, block_size=4, n_layer=1, n_head=2, n_embd=4)
    model = gpt2.GptModel(config, batch=1, backend=REF, strategy="whole")
    directory = gpt2.save(model, tmp_path / "gpt2")
    artifact = Artifact(directory, tmp_path / "case",
                        weights={"config.json": 1.0, "model.safetensors": 1.0})
    tally = run_cases("gpt2.load", CASES, 29, artifact.mutate, artifact.attempt(
        lambda d: gpt2.load(d, backend=REF, strategy="whole")))
    check(tally, record_property)


# -- episodic indexes -----------------------------------------------------------------------
def test_episodic_index_load_and_search(tmp_path, record_property):
    from tensorcode.tools.episodic import EpisodicIndex

    vectors = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    index = EpisodicIndex.from_vectors(["a", "bb", "ccc", "déjà"], vectors)
    artifact = Artifact(index.save(tmp_path / "index.safetensors"), tmp_path / "case")
    query = np.ones((2, 3), np.float32)
    tally = run_cases("EpisodicIndex.load + search", CASES, 29, artifact.mutate,
                      artifact.attempt(lambda d: EpisodicIndex.load(
                          d / "index.safetensors").search_vectors(query, k=2)))
    check(tally, record_property)


# -- saved plans ----------------------------------------------------------------------------
def test_plan_load_and_forward(tmp_path, record_property):
    tape = tc.Tape()
    mlp = tc.nn.Mlp(tape, [2, 3, 1], "tanh", tc.init.xavier(3))
    x = tape.input(np.ones((4, 2), np.float32), name="x")
    out = mlp(x).sum(axis=1)
    network = tape.into_network()
    plan = network.entry([out]).lower(REF)
    plan.save(tmp_path / "plan")
    artifact = Artifact(tmp_path / "plan", tmp_path / "case")

    def load(directory: pathlib.Path) -> Any:
        loaded = tc.Plan.load(directory, backend=REF)
        return loaded.forward(loaded.network.parameters(), {})

    tally = run_cases("Plan.load + forward", CASES, 29, artifact.mutate,
                      artifact.attempt(load))
    check(tally, record_property)


# -- experiences ----------------------------------------------------------------------------
def test_experience_load_and_replay(tmp_path, record_property):
    from tensorcode import trace
    from tensorcode.operations import Classifier, LinearOperation, TextEncoder
    from tensorcode.training import load_experience

    encoder = TextEncoder(4, buckets=16, seed=1, backend=REF)
    head = Classifier(4, ["a", "b"], seed=2, backend=REF)
    layer = LinearOperation(2, 2, seed=3, backend=REF)
    operations = {"encoder": encoder, "head": head, "layer": layer}
    session = trace()
    session.run(lambda: (head(encoder("the service is down")), layer(np.eye(2))))
    session.supervise(session.calls[1].output, "b", source="review")
    session.supervise(session.calls[2].output, np.zeros((2, 2)), loss="mse", source="review")
    session.save(tmp_path / "experience.json", operations=operations)
    artifact = Artifact(tmp_path / "experience.json", tmp_path / "case")

    def load(directory: pathlib.Path) -> Any:
        loaded = load_experience(directory / "experience.json", operations=operations)
        return [loaded.replay(s.ref) for s in loaded.supervisions]

    tally = run_cases("load_experience + replay", CASES, 29, artifact.mutate,
                      artifact.attempt(load))
    check(tally, record_property)


def test_documented_errors_are_tensorcode_errors():
    """The harness counts a ``TensorCodeError`` as documented: the loaders' errors are."""
    from tensorcode.errors import ArtifactError, PatchError

    assert issubclass(ArtifactError, TensorCodeError) and issubclass(PatchError,
                                                                     TensorCodeError)


# -- chat sessions --------------------------------------------------------------------------
def test_chat_session_load(tmp_path, record_property):
    from tensorcode.tools.chatbot import ChatSession, Message

    session = ChatSession([Message("user", "hello there"), Message("assistant", "hi!")])
    artifact = Artifact(session.save(tmp_path / "session.json"), tmp_path / "case")
    tally = run_cases("ChatSession.load", CASES, 29, artifact.mutate, artifact.attempt(
        lambda d: ChatSession.load(d / "session.json")))
    check(tally, record_property)
