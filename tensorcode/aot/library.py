"""What an exported library holds (``Library``) and its C source and header, rendered.

A ``Library`` is plain data: the plan's object code and its argument layout (from the
llvm backend), the parameter and constant buffers, the named inputs and outputs, and
for a router the root holding ``covered``. ``render_header`` and ``render_source`` write
the C interface around the object: every name, message and number in them is emitted
as an escaped string literal or an integer the renderer formats itself, and the
library's prefix is checked against ``NAME_PATTERN``, so nothing a program's author
wrote reaches the C text as code.

The ABI (documented in the header it renders, and in ``docs/embedding.md``): a handle
per thread (``<name>_open``: the scratch and output arenas, allocated once), the
interface read back from the library, one case (``<name>_run``) or N (``<name>_batch``,
the same compiled body once per case) into caller-owned buffers, status codes with a
message, the TensorCode version and the content hash. The parameters are embedded in
the library's read-only data (``.incbin`` of the exported values, aligned to 64 bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import TensorCodeError
from ..version import __version__
from .abi import DTYPE_CODES, NAME_PATTERN, STATUS

#: the C type of each dtype
C_TYPES = {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t"}
#: the alignment of each embedded buffer in the values blob
ALIGNMENT = 64
#: the blob the C source embeds with ``.incbin`` (written beside it when building)
VALUES_BLOB = "values.bin"


@dataclass(frozen=True)
class Port:
    """An input or output of the library: its name, dtype and shape per case; for an
    input ``slot`` its position among the plan's inputs (None: the plan does not read
    it), for an output ``arena`` and ``offset`` where its root lies in the output arenas."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    slot: int | None = None
    arena: int = 0
    offset: int = 0

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def describe(self) -> dict:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}


@dataclass
class Library:
    """Everything an export links (see the module docstring). ``arguments`` are the
    object's arenas in its argument order as ``(role, dtype)``; ``scratch`` and
    ``output_arenas`` the element count of each scratch and output arena in that order;
    ``errors`` the message of each nonzero status of the plan; ``head`` the parameter and
    constant buffers in argument order; ``covered`` the ``(arena, offset)`` of a router's
    covered root (None: it claims every case with finite outputs) and ``threshold`` the
    value it must exceed to claim a case."""

    name: str
    kind: str
    object: bytes
    entry: str
    arguments: list[tuple[str, str]]
    scratch: list[int]
    output_arenas: list[int]
    errors: list[str]
    head: list[np.ndarray]
    inputs: list[Port]
    outputs: list[Port]
    target: dict[str, str]
    blas: list[str] = field(default_factory=list)
    covered: tuple[int, int] | None = None
    threshold: float = 0.5

    def check(self) -> None:
        """Refuse what the renderer cannot write safely or the ABI cannot express."""
        if not NAME_PATTERN.fullmatch(self.name):
            raise TensorCodeError(f"a library name is lowercase letters, digits and '_', "
                                  f"starting with a letter, at most 48 characters; got "
                                  f"{self.name!r}")
        for port in self.inputs + self.outputs:
            if port.dtype not in DTYPE_CODES:
                raise TensorCodeError(f"{port.name!r}: dtype {port.dtype} has no C type here")
        if not self.outputs:
            raise TensorCodeError("a library needs at least one output")
        names = [p.name for p in self.inputs] + [p.name for p in self.outputs]
        if len(set(names)) != len(names):
            raise TensorCodeError(f"input and output names must differ: {names}")

    def values(self) -> bytes:
        """The head buffers, each padded to ``ALIGNMENT`` bytes (the embedded blob)."""
        blob = bytearray()
        for array in self.head:
            blob += np.ascontiguousarray(array).tobytes()
            blob += bytes(-len(blob) % ALIGNMENT)
        return bytes(blob)

    def interface(self) -> dict:
        """The facts the manifest records and the loader checks against the library."""
        return {"kind": self.kind, "inputs": [p.describe() for p in self.inputs],
                "outputs": [p.describe() for p in self.outputs],
                "router": ({"covered_threshold": self.threshold} if self.kind == "router"
                           else None)}


def c_string(text: str) -> str:
    """``text`` as a C string literal: letters, digits and a few safe punctuation marks
    as they are, every other byte of its UTF-8 as a three-digit octal escape."""
    safe = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:;()[]#/+=")
    return '"' + "".join(chr(b) if chr(b) in safe else f"\\{b:03o}"
                         for b in text.encode("utf-8")) + '"'


def _table(c_type: str, name: str, values: list[str]) -> str:
    return f"static const {c_type} {name}[{max(len(values), 1)}] = {{{', '.join(values) or '0'}}};"


def render_header(library: Library) -> str:
    """``<name>.h``: the documented C interface of ``lib<name>.so``."""
    n, upper = library.name, library.name.upper()
    ins = "\n".join(f" *   input  {k}: {c_string(p.name)} {p.dtype}{list(p.shape)}"
                    for k, p in enumerate(library.inputs))
    outs = "\n".join(f" *   output {k}: {c_string(p.name)} {p.dtype}{list(p.shape)}"
                     for k, p in enumerate(library.outputs))
    statuses = "\n".join(f"#define {upper}_{key} {value}" for key, value in STATUS.items())
    dtypes = "\n".join(f"#define {upper}_{d.upper()} {code}" for d, code in DTYPE_CODES.items())
    covered = ("a router: covered[c] is 1 when the program claims case c (its covered value\n"
               f" * is finite and above {library.threshold!r} and every output is finite), "
               "else 0: call your\n * fallback for that case, as the Python Router does"
               if library.kind == "router" else
               "a plan: covered[c] is always 1 (nothing to escalate)")
    return f"""/* {n}.h: the C interface of lib{n}.so, exported by TensorCode {__version__}.
 *
 * Inputs and outputs, in the order every call takes them (each a C-order array of one
 * case; a batch holds N cases one after another):
{ins}
{outs}
 * This library is {covered}.
 *
 * Open one handle per thread (it holds the working memory of a call); calls on one
 * handle must not overlap. Buffers belong to the caller; no call allocates. Every
 * function returns a status: {upper}_OK, or an error whose text {n}_message gives.
 * The library runs only on a CPU with the features it was exported for (manifest.json).
 */
#ifndef TENSORCODE_{upper}_H
#define TENSORCODE_{upper}_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

{statuses}
{dtypes}
#define {upper}_IS_ROUTER {1 if library.kind == "router" else 0}

typedef struct {n}_handle {n}_handle;

/* Allocate a handle (its scratch and output arenas); {upper}_ERROR_MEMORY if it cannot. */
int {n}_open({n}_handle **handle);
/* Free a handle (NULL is ignored). */
void {n}_close({n}_handle *handle);

/* The interface: counts, then per input or output k its name, dtype code, rank,
 * shape (rank numbers) and size (elements of one case). Out-of-range k: NULL or -1. */
int64_t {n}_input_count(void);
int64_t {n}_output_count(void);
const char *{n}_input_name(int64_t k);
const char *{n}_output_name(int64_t k);
int32_t {n}_input_dtype(int64_t k);
int32_t {n}_output_dtype(int64_t k);
int64_t {n}_input_rank(int64_t k);
int64_t {n}_output_rank(int64_t k);
const int64_t *{n}_input_shape(int64_t k);
const int64_t *{n}_output_shape(int64_t k);
int64_t {n}_input_size(int64_t k);
int64_t {n}_output_size(int64_t k);

/* One case: inputs[k] points to input k, outputs[k] to room for output k; covered
 * (may be NULL) receives the covered flag. */
int {n}_run({n}_handle *handle, const void *const *inputs, void *const *outputs,
            int32_t *covered);
/* n cases: inputs[k] holds n cases of input k, outputs[k] room for n of output k,
 * covered (may be NULL) n flags. Stops at the first refused case ({n}_failed_case). */
int {n}_batch({n}_handle *handle, int64_t n, const void *const *inputs,
              void *const *outputs, int32_t *covered);
/* The case a batch stopped at (-1 when none). */
int64_t {n}_failed_case(const {n}_handle *handle);
/* The text of a status; for {upper}_ERROR_INPUT, what the last call on handle refused. */
const char *{n}_message(const {n}_handle *handle, int status);

/* The TensorCode version that exported it, and the hash of its content (object code,
 * parameters and interface; manifest.json's content_hash). */
const char *{n}_version(void);
const char *{n}_content_hash(void);

#ifdef __cplusplus
}}
#endif

#endif
"""


ARGUMENT_TEXT = c_string("a null handle or buffer, or a negative case count")
MEMORY_TEXT = c_string("out of memory while opening a handle")


def render_source(library: Library, content_hash: str) -> str:
    """The C wrapper around the plan's object (see the module docstring)."""
    lib, n = library, library.name
    upper = n.upper()
    args = lib.arguments
    head_roles = [k for k, (role, _) in enumerate(args) if role in ("parameter", "constant")]
    input_args = [k for k, (role, _) in enumerate(args) if role == "input"]
    scratch_args = [k for k, (role, _) in enumerate(args) if role == "scratch"]
    output_args = [k for k, (role, _) in enumerate(args) if role == "output"]
    assert len(head_roles) == len(lib.head) and len(scratch_args) == len(lib.scratch)
    lines = [f'#include "{n}.h"', "#include <math.h>", "#include <stdlib.h>",
             "#include <string.h>", "",
             f"int32_t {lib.entry}(void **arrays, int64_t *extents, double lr);", "",
             '__asm__(".section .rodata\\n.balign 64\\n.local tc_values\\n'
             '.type tc_values, @object\\ntc_values:\\n'
             f'.incbin \\"{VALUES_BLOB}\\"\\n.byte 0\\n.size tc_values, .-tc_values\\n'
             '.previous\\n");',
             'extern const unsigned char tc_values[] __attribute__((visibility("hidden")));',
             "",
             "/* a partitioned loop's chunks, in order on the calling thread (a chunk's work",
             "   does not depend on which thread runs it, so the answers are the same bits) */",
             '__attribute__((visibility("hidden"))) void tc_pool_run(',
             "        void (*chunk)(void *, int64_t), void *context, int64_t chunks) {",
             "    for (int64_t i = 0; i < chunks; ++i) chunk(context, i);",
             "}", ""]
    memory = len(scratch_args) + len(output_args)
    lines += [f"#define ARGUMENTS {len(args)}", f"#define MEMORY {max(memory, 1)}",
              f"#define INPUTS {len(lib.inputs)}", f"#define OUTPUTS {len(lib.outputs)}",
              f"#define ERRORS {len(lib.errors)}", ""]
    # the interface tables
    for kind, ports in (("input", lib.inputs), ("output", lib.outputs)):
        for k, port in enumerate(ports):
            lines.append(_table("int64_t", f"{kind}_shape_{k}", [str(d) for d in port.shape]))
        lines.append(_table("char *const", f"{kind}_names",
                            [c_string(p.name) for p in ports]))
        lines.append(_table("int32_t", f"{kind}_dtypes",
                            [str(DTYPE_CODES[p.dtype]) for p in ports]))
        lines.append(_table("int64_t", f"{kind}_ranks", [str(len(p.shape)) for p in ports]))
        lines.append(_table("int64_t", f"{kind}_sizes", [str(p.size) for p in ports]))
        lines.append(_table("int64_t *const", f"{kind}_shapes",
                            [f"{kind}_shape_{k}" for k in range(len(ports))]))
    lines.append(_table("char *const", "plan_errors", [c_string(e) for e in lib.errors]))
    lines.append(_table("char *const", "refused_inputs",
                        [c_string(f"input {p.name!r} holds a value that is not finite")
                         for p in lib.inputs]))
    lines += ["", f"struct {n}_handle {{", "    void *arrays[ARGUMENTS];",
              "    void *memory[MEMORY];", "    int32_t plan_status;",
              "    int32_t refused_input;", "    int64_t failed_case;", "};", ""]
    # open and close
    lines += [f"void {n}_close({n}_handle *handle) {{", "    if (!handle) return;",
              "    for (int k = 0; k < MEMORY; k++) free(handle->memory[k]);",
              "    free(handle);", "}", "",
              f"int {n}_open({n}_handle **handle) {{",
              f"    if (!handle) return {upper}_ERROR_ARGUMENT;", "    *handle = NULL;",
              f"    {n}_handle *h = calloc(1, sizeof *h);",
              f"    if (!h) return {upper}_ERROR_MEMORY;",
              "    h->failed_case = -1;", "    h->refused_input = -1;"]
    offset = 0
    for k, array in zip(head_roles, lib.head):
        lines.append(f"    h->arrays[{k}] = (void *)(tc_values + {offset});")
        offset += array.nbytes + (-array.nbytes % ALIGNMENT)
    sized = list(zip(scratch_args, lib.scratch)) + list(zip(output_args, lib.output_arenas))
    for slot, (k, count) in enumerate(sized):
        item = np.dtype(args[k][1]).itemsize
        lines += [f"    h->memory[{slot}] = h->arrays[{k}] = malloc({max(count, 1) * item});",
                  f"    if (!h->memory[{slot}]) {{ {n}_close(h); return {upper}_ERROR_MEMORY; }}"]
    lines += ["    *handle = h;", f"    return {upper}_OK;", "}", ""]
    # one case
    lines += ["static int run_case(" + f"{n}_handle *h, const void *const *inputs, "
              "void *const *outputs, int32_t *covered, int64_t c) {"]
    for k, port in enumerate(lib.inputs):
        c_type = C_TYPES[port.dtype]
        lines.append(f"    const {c_type} *in{k} = (const {c_type} *)inputs[{k}] + "
                     f"c * {port.size};")
        if lib.kind == "router" and port.dtype in ("float32", "float64"):
            lines += [f"    for (int64_t i = 0; i < {port.size}; i++)",
                      f"        if (!isfinite(in{k}[i])) {{ h->refused_input = {k}; "
                      f"return {upper}_ERROR_INPUT; }}"]
        if port.slot is not None:
            lines.append(f"    h->arrays[{input_args[port.slot]}] = (void *)in{k};")
    lines += [f"    int32_t status = {lib.entry}(h->arrays, NULL, 0.0);",
              f"    if (status) {{ h->plan_status = status; return {upper}_ERROR_INPUT; }}"]
    for k, port in enumerate(lib.outputs):
        c_type = C_TYPES[port.dtype]
        lines.append(f"    const {c_type} *out{k} = (const {c_type} *)h->arrays"
                     f"[{output_args[port.arena]}] + {port.offset};")
        lines.append(f"    memcpy(({c_type} *)outputs[{k}] + c * {port.size}, out{k}, "
                     f"{port.size * np.dtype(port.dtype).itemsize});")
    if lib.kind == "router":
        lines += ["    if (covered) {", "        int32_t claims = 1;"]
        if lib.covered is not None:  # a program that never abstains claims every case
            arena, at = lib.covered
            c_type = C_TYPES[args[output_args[arena]][1]]
            lines += [f"        double value = (double)((const {c_type} *)h->arrays"
                      f"[{output_args[arena]}])[{at}];",
                      f"        claims = value > {lib.threshold!r} && value < INFINITY;"]
        for k, port in enumerate(lib.outputs):
            if port.dtype in ("float32", "float64"):
                lines += [f"        for (int64_t i = 0; claims && i < {port.size}; i++)",
                          f"            claims = isfinite(out{k}[i]) != 0;"]
        lines += ["        covered[c] = claims;", "    }"]
    else:
        lines.append("    if (covered) covered[c] = 1;")
    lines += [f"    return {upper}_OK;", "}", ""]
    check = ("    for (int k = 0; k < INPUTS; k++) if (!inputs[k]) "
             f"return {upper}_ERROR_ARGUMENT;\n"
             "    for (int k = 0; k < OUTPUTS; k++) if (!outputs[k]) "
             f"return {upper}_ERROR_ARGUMENT;")
    lines += [f"int {n}_run({n}_handle *h, const void *const *inputs, void *const *outputs, "
              "int32_t *covered) {",
              f"    if (!h || (INPUTS && !inputs) || !outputs) return {upper}_ERROR_ARGUMENT;",
              check, "    h->plan_status = 0; h->refused_input = -1; h->failed_case = -1;",
              "    int status = run_case(h, inputs, outputs, covered, 0);",
              "    if (status) h->failed_case = 0;", "    return status;", "}", "",
              f"int {n}_batch({n}_handle *h, int64_t n, const void *const *inputs, "
              "void *const *outputs, int32_t *covered) {",
              f"    if (!h || n < 0 || (INPUTS && !inputs) || !outputs) "
              f"return {upper}_ERROR_ARGUMENT;",
              check, "    h->plan_status = 0; h->refused_input = -1; h->failed_case = -1;",
              "    for (int64_t c = 0; c < n; c++) {",
              "        int status = run_case(h, inputs, outputs, covered, c);",
              "        if (status) { h->failed_case = c; return status; }", "    }",
              f"    return {upper}_OK;", "}", "",
              f"int64_t {n}_failed_case(const {n}_handle *h) {{ return h ? h->failed_case : -1; }}",
              "",
              f"const char *{n}_message(const {n}_handle *h, int status) {{",
              "    switch (status) {",
              f"    case {upper}_OK: return \"ok\";",
              f"    case {upper}_ERROR_ARGUMENT: return {ARGUMENT_TEXT};",
              f"    case {upper}_ERROR_MEMORY: return {MEMORY_TEXT};",
              f"    case {upper}_ERROR_INPUT:",
              "        if (h && h->plan_status >= 1 && h->plan_status <= ERRORS) "
              "return plan_errors[h->plan_status - 1];",
              "        if (h && h->refused_input >= 0 && h->refused_input < INPUTS) "
              "return refused_inputs[h->refused_input];",
              f"        return {c_string('an input value was refused')};",
              f"    default: return {c_string('not a status of this library')};", "    }", "}",
              ""]
    for kind in ("input", "output"):
        macro = "INPUTS" if kind == "input" else "OUTPUTS"
        lines += [f"int64_t {n}_{kind}_count(void) {{ return {macro}; }}",
                  f"const char *{n}_{kind}_name(int64_t k) "
                  f"{{ return k >= 0 && k < {macro} ? {kind}_names[k] : NULL; }}",
                  f"int32_t {n}_{kind}_dtype(int64_t k) "
                  f"{{ return k >= 0 && k < {macro} ? {kind}_dtypes[k] : -1; }}",
                  f"int64_t {n}_{kind}_rank(int64_t k) "
                  f"{{ return k >= 0 && k < {macro} ? {kind}_ranks[k] : -1; }}",
                  f"const int64_t *{n}_{kind}_shape(int64_t k) "
                  f"{{ return k >= 0 && k < {macro} ? {kind}_shapes[k] : NULL; }}",
                  f"int64_t {n}_{kind}_size(int64_t k) "
                  f"{{ return k >= 0 && k < {macro} ? {kind}_sizes[k] : -1; }}"]
    lines += [f"const char *{n}_version(void) {{ return {c_string(__version__)}; }}",
              f"const char *{n}_content_hash(void) {{ return {c_string(content_hash)}; }}", ""]
    return "\n".join(lines)


__all__ = ["ALIGNMENT", "C_TYPES", "DTYPE_CODES", "Library", "NAME_PATTERN", "Port",
           "STATUS", "VALUES_BLOB", "c_string", "render_header", "render_source"]
