"""Wrong-but-obvious calls a PyTorch user makes: ``fit`` on one experience, a loss read
with ``.item()``, and a refused update that says which one it was."""

from __future__ import annotations

import numpy as np
import pytest

import tensorcode as tc
from tensorcode import trace
from tensorcode.errors import TrainingError
from tensorcode.operations import LinearOperation
from tensorcode.training import Trainer

REF = "reference"


def _setup(target=1, steps_per_call=32, lr=0.1, losses=None, loss="cross_entropy"):
    layer = LinearOperation(2, 2, seed=1, backend=REF)
    session = trace()
    out = session.run(lambda: layer(np.ones(2, np.float32)))
    session.supervise(out, target, loss=loss, source="test")
    trainer = Trainer.from_ops({"layer": layer}, lr=lr, backend=REF,
                               optimizer=tc.optim.Sgd(backend=REF), losses=losses,
                               steps_per_call=steps_per_call)
    return trainer, session


def test_fit_takes_one_experience_as_a_list_of_one():
    trainer, session = _setup()
    losses = trainer.fit(session, epochs=3, progress=False)
    assert len(losses) == 3 and trainer.steps == 3
    again, session2 = _setup()
    assert again.fit([session2], epochs=3, progress=False) == losses


def test_fit_refuses_what_is_not_experiences_with_a_clear_type_error():
    trainer, _ = _setup()
    with pytest.raises(TypeError, match="list of experiences"):
        trainer.fit(42, epochs=1)
    with pytest.raises(TypeError, match="Trace"):
        trainer.fit(["not an experience"], epochs=1)


def test_losses_are_scalars_with_item():
    trainer, session = _setup()
    loss = trainer.step(session)
    assert isinstance(loss, float) and isinstance(loss.item(), float)
    assert loss.item() == float(loss)
    for value in trainer.fit([session], epochs=2, progress=False):
        assert isinstance(value, float) and value.item() == float(value)


@pytest.mark.parametrize("steps_per_call", [1, 32])
def test_a_refused_update_in_fit_is_named(steps_per_call):
    trainer, good = _setup()
    layer = trainer.operations["layer"]
    bad = trace()  # a target of 1e36 at lr 1e4 moves the weights past float32's range
    out = bad.run(lambda: layer(np.ones(2, np.float32)))
    bad.supervise(out, np.full(2, 1e36, np.float32), loss="scaled", source="test")
    trainer = Trainer.from_ops({"layer": layer}, lr=1e4, backend=REF,
                               optimizer=tc.optim.Sgd(backend=REF),
                               losses={"scaled": lambda o, t: (o * t).mean()},
                               steps_per_call=steps_per_call)
    with pytest.raises(TrainingError, match=r"update 3 of 6 in this fit \(epoch 1, "
                                            r"experiences\[2\]\) was refused: .*nonfinite"):
        trainer.fit([good, good, bad], epochs=2, shuffle=False, progress=False)
    assert trainer.steps == 2  # the two updates before it kept, nothing after
