"""The author-subset front end: a lark-parsed program becomes the same ``Tape`` calls a user
makes (``syntax`` parses, ``walker`` records, ``language`` holds the callable tables,
``reply`` reads a program and its json block out of a model's reply).
"""

from .walker import (
    BINARY_FUNCTIONS,
    COMPARISONS,
    CONSTANT_NAMES,
    DTYPE,
    FUNCTION_NAMES,
    INTEGER_OPERATORS,
    MAX_LITERAL_ELEMENTS,
    MAX_NODES,
    MAX_PARAMETER_ELEMENTS,
    MAX_TENSOR_ELEMENTS,
    MAX_UNROLLED_STATEMENTS,
    METHODS,
    OPERATORS,
    OTHER_FUNCTIONS,
    UNARY_FUNCTIONS,
    CompiledProgram,
    compile_program,
    normalize_contract,
    normalize_parameters,
    parse_reply,
)

__all__ = ["compile_program", "parse_reply", "CompiledProgram", "normalize_contract",
           "normalize_parameters", "DTYPE", "UNARY_FUNCTIONS", "BINARY_FUNCTIONS",
           "OTHER_FUNCTIONS", "METHODS", "OPERATORS", "COMPARISONS",
           "INTEGER_OPERATORS", "CONSTANT_NAMES", "FUNCTION_NAMES",
           "MAX_UNROLLED_STATEMENTS", "MAX_NODES", "MAX_LITERAL_ELEMENTS",
           "MAX_TENSOR_ELEMENTS", "MAX_PARAMETER_ELEMENTS"]
