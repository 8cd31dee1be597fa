"""parse_reply (program and json block out of a model's reply) and SUBSET_SPEC, which
must agree with the grammar, the compiler's tables and the op registry."""

from __future__ import annotations

import re

import pytest

from tensorcode.compiler import subset
from tensorcode.compiler.core import registry as primitives
from tensorcode.compiler.subset import compile_program, parse_reply
from tensorcode.compiler.subset.syntax import GRAMMAR_PATH, parser
from tensorcode.distill.spec import (
    EXAMPLE,
    EXAMPLE_INPUTS,
    EXAMPLE_OUTPUTS,
    EXAMPLE_PARAMETERS,
    SUBSET_SPEC,
)
from tensorcode.errors import CompileError

PROGRAM = "def f(x, t):\n    return {'y': x.sum() * t}\n"


def test_reply_with_fenced_python_and_json_blocks():
    reply = f"Here is the program.\n```python\n{PROGRAM}```\nParameters:\n```json\n" \
            '{"t": 2.5, "w": [[1, 2], [3, 4]]}\n```\nDone.'
    source, parameters = parse_reply(reply)
    assert source == PROGRAM
    assert parameters == {"t": 2.5, "w": [[1, 2], [3, 4]]}


def test_reply_without_fences_is_the_whole_text_and_no_parameters():
    assert parse_reply(PROGRAM) == (PROGRAM, {})


def test_reply_untagged_fence_and_unclosed_fence():
    assert parse_reply(f"```\n{PROGRAM}```")[0] == PROGRAM
    assert parse_reply(f"```py\n{PROGRAM}")[0] == PROGRAM


def test_reply_prefers_the_python_block_over_other_fences():
    reply = f"```text\nnotes\n```\n```python\n{PROGRAM}```"
    assert parse_reply(reply)[0] == PROGRAM


@pytest.mark.parametrize("block,fragment", [
    ("{\"t\": 1,}", "not valid JSON"),
    ("[1, 2]", "must be an object"),
    ("{\"t\": NaN}", "cannot be read"),
    ("{\"t\": \"x\"}", "must hold numbers"),
    ("{\"t\": [[1], [2, 3]]}", "rectangular"),
    ("{\"t\": true}", "must hold numbers"),
    ("{\"exp\": 1}", "not usable"),
    ("[" * 100000 + "]" * 100000, "cannot be read"),
])
def test_reply_bad_json_block_is_a_compile_error(block, fragment):
    with pytest.raises(CompileError, match=re.escape(fragment)) as info:
        parse_reply(f"```python\n{PROGRAM}```\n```json\n{block}\n```")
    assert info.value.line is not None


def test_reply_with_only_json_is_refused_and_non_text_too():
    with pytest.raises(CompileError, match="no program"):
        parse_reply("```json\n{\"t\": 1}\n```")
    with pytest.raises(CompileError, match="text"):
        parse_reply(None)


def test_reply_then_compile_round_trip():
    source, parameters = parse_reply(f"```python\n{PROGRAM}```\n```json\n{{\"t\": 3}}\n```")
    program = compile_program(source, {"x": (2,)}, {"y": ()}, parameters)
    assert list(program.parameters) == ["t"]


# ---------------------------------------------------------------------------------------
# SUBSET_SPEC


def test_spec_example_compiles_and_is_one_page():
    source, parameters = parse_reply(EXAMPLE)
    assert parameters == EXAMPLE_PARAMETERS
    compile_program(source, EXAMPLE_INPUTS, EXAMPLE_OUTPUTS, parameters)
    assert EXAMPLE in SUBSET_SPEC
    assert len(SUBSET_SPEC.splitlines()) <= 80


def test_every_table_entry_is_a_registry_op_and_is_documented():
    for name, op in {**subset.UNARY_FUNCTIONS, **subset.BINARY_FUNCTIONS}.items():
        assert op in primitives.REGISTRY, op
        assert re.search(rf"\b{name}\b", SUBSET_SPEC), name
    for name, used in {**subset.OTHER_FUNCTIONS, **subset.METHODS}.items():
        assert all(op in primitives.REGISTRY for op in used), name
        assert re.search(rf"\b{name}\b", SUBSET_SPEC), name
    for symbol, op in {**subset.OPERATORS, **subset.COMPARISONS}.items():
        assert op in primitives.REGISTRY, op
        assert symbol in SUBSET_SPEC, symbol
    for symbol in subset.INTEGER_OPERATORS:
        assert symbol in SUBSET_SPEC


def test_documented_functions_are_exactly_the_compiled_ones():
    """Each name the spec calls as f(...) is a function or method the compiler accepts
    (or range, or a construct the spec lists as refused)."""
    accepted = set(subset.FUNCTION_NAMES) | set(subset.METHODS) | {"range", "def", "name"}
    refused = {"print"}
    called = set(re.findall(r"\b([a-z_]+)\(", SUBSET_SPEC.replace(EXAMPLE, "")))
    assert called - accepted - refused == set()


def test_every_grammar_keyword_is_in_the_spec():
    """The grammar's keywords are either the language's own or refused by name in the
    spec, so the page never hides a construct the parser knows."""
    grammar = GRAMMAR_PATH.read_text()
    keywords = set(re.findall(r'"([a-z]+)"', grammar))
    assert keywords >= {"def", "for", "in", "return", "if", "while", "lambda", "import"}
    mentioned = {"as": "imports", "from": "imports", "import": "imports", "elif": "if/else"}
    for keyword in keywords:
        assert re.search(rf"\b{keyword}\b", SUBSET_SPEC) or mentioned[keyword] in SUBSET_SPEC
    parser()  # the grammar itself builds (LALR, no conflicts)


def test_spec_limits_come_from_the_compiler():
    assert str(subset.MAX_UNROLLED_STATEMENTS) in SUBSET_SPEC
    assert str(subset.MAX_LITERAL_ELEMENTS) in SUBSET_SPEC


def test_distill_package_reexports_the_spec():
    import tensorcode.distill as distill
    assert distill.SUBSET_SPEC is SUBSET_SPEC
