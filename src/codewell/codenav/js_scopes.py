"""JavaScript/TypeScript local scopes: which plain uses of a module-level name a local binding shadows.

A function's parameters (plain, defaulted, rest, destructured), `const`/`let` in a block, `var` in a function,
catch parameters, `for (const x of ...)` bindings and functions or classes declared inside a block bind a name
for their scope; there a plain use of the name means that local, not the module's definition (nor an import).
Module-level bindings are the module's own names and never shadow.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

from tree_sitter import Node, Parser, Point
from tree_sitter_language_pack import get_language

from codewell.codenav.languages import Grammar

__all__ = ["destructured_members", "shadowed_uses"]

Spot = tuple[int, int, str]  # (1-based line, 1-based byte column, occurrence role)

_FUNCTIONS = frozenset(
    {
        "function_declaration",
        "function_expression",
        "function",
        "arrow_function",
        "method_definition",
        "generator_function_declaration",
        "generator_function",
    }
)
# Where `const`/`let` (and declarations of functions and classes) bind: the innermost of these.
_BLOCKS = frozenset({"statement_block", "for_statement", "for_in_statement", "switch_body", "class_static_block"})
_MODULE = frozenset({"program"})
# Pattern nodes a bound name sits in, up to the construct that binds it.
_PATTERNS = frozenset(
    {
        "object_pattern",
        "array_pattern",
        "pair_pattern",
        "assignment_pattern",
        "object_assignment_pattern",
        "rest_pattern",
        "required_parameter",
        "optional_parameter",
    }
)
# Array methods whose callback's first parameter is an element of the array.
_ELEMENT_CALLBACKS = frozenset(
    {"forEach", "map", "filter", "find", "findLast", "some", "every", "flatMap", "findIndex"}
)
_DECLARED = frozenset({"function_declaration", "generator_function_declaration", "class_declaration"})
# Larger files are not parsed again at query time (a shadowing local is missed there, as before).
_MAX_BYTES = 1_000_000


@cache
def _parser(ts_name: str) -> Parser:
    return Parser(get_language(ts_name))  # type: ignore[arg-type]  # the JS/TS grammar names are fixed


def _ancestors(node: Node) -> Iterator[Node]:
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def _enclosing(node: Node, kinds: frozenset[str]) -> Node | None:
    return next((a for a in _ancestors(node) if a.type in kinds or a.type in _MODULE), None)


def _is_pattern_name(node: Node, pattern: Node) -> bool:
    """Whether `node` is a name `pattern` binds (not a default value, a computed key or a type in it)."""
    child = node
    parent = child.parent
    while parent is not None and parent.id != pattern.id:
        if parent.type == "pair_pattern" and parent.child_by_field_name("value") != child:
            return False  # the key of `{ key: local }`
        if (
            parent.type in ("assignment_pattern", "object_assignment_pattern")
            and parent.child_by_field_name("left") != child
        ):
            return False  # the default value of `x = name`
        if (
            parent.type in ("required_parameter", "optional_parameter")
            and parent.child_by_field_name("pattern") != child
        ):
            return False  # a type annotation or default
        if parent.type not in _PATTERNS:
            return False
        child, parent = parent, parent.parent
    return parent is not None


def _binding_scope(node: Node) -> Node | None:  # noqa: PLR0912 - one branch per binding form
    """The node a local binding made by the identifier `node` covers, or None when `node` binds nothing locally."""
    parent = node.parent
    if parent is None:
        return None
    if parent.type in _DECLARED and parent.child_by_field_name("name") == node:
        scope = _enclosing(parent, _BLOCKS | _FUNCTIONS)
        return None if scope is None or scope.type in _MODULE else scope
    if parent.type in ("function_expression", "function", "generator_function") and (
        parent.child_by_field_name("name") == node
    ):
        return parent  # a named function expression sees its own name
    if parent.type == "arrow_function" and parent.child_by_field_name("parameter") == node:
        return parent
    if parent.type == "catch_clause" and parent.child_by_field_name("parameter") == node:
        return parent
    for holder in _ancestors(node):
        if holder.type == "formal_parameters":
            function = holder.parent
            return function if _is_pattern_name(node, holder) else None
        if holder.type == "catch_clause":
            pattern = holder.child_by_field_name("parameter")
            return holder if pattern is not None and _is_pattern_name(node, pattern) else None
        if holder.type == "variable_declarator":
            pattern = holder.child_by_field_name("name")
            if pattern is None or not (pattern == node or _is_pattern_name(node, pattern)):
                return None
            declaration = holder.parent
            kinds = _FUNCTIONS if declaration is not None and declaration.type == "variable_declaration" else _BLOCKS
            scope = _enclosing(holder, kinds | _FUNCTIONS)
            return None if scope is None or scope.type in _MODULE else scope
        if holder.type == "for_in_statement":
            left = holder.child_by_field_name("left")
            bound = holder.child_by_field_name("kind") is not None  # `for (x of xs)` assigns, it binds nothing
            if left is None or not bound or not (left == node or _is_pattern_name(node, left)):
                return None
            return holder
        if holder.type not in _PATTERNS:
            return None
    return None


def _may_bind(data: bytes, name: str) -> bool:
    """Whether the text can hold a binding or a property name `name` at all (a cheap test before parsing): after
    `(`, `,`, `{`, `[`, `...` or a declaring keyword, or before `=>`."""
    word = re.escape(name.encode())
    return (
        re.search(
            rb"(?:[(,{\[]|\.\.\.|\b(?:const|let|var|function|class)\s)\s*" + word + rb"\b|\b" + word + rb"\s*=>", data
        )
        is not None
    )


def shadowed_uses(grammar: Grammar, data: bytes, name: str, spots: list[Spot]) -> set[Spot]:
    """The plain occurrences (role "r") among `spots`, those of `name` in one file, that do not mean a module-level
    `name`: the ones a local binding of `name` covers (the bindings included), and property names in object
    literals and patterns."""
    if not any(role == "r" for _, _, role in spots) or len(data) > _MAX_BYTES or not _may_bind(data, name):
        return set()
    root = _parser(grammar.ts_name).parse(data).root_node
    scopes: list[tuple[Point, Point]] = []
    keys: set[tuple[int, int]] = set()
    # Every role: the index files `...name` as a member access ("m", after a `.`); the tree decides.
    for line, column, _role in spots:
        at = Point(line - 1, column - 1)
        # A one-byte range: an empty one at a name's start may answer the token just before it (`...name`).
        node = root.descendant_for_point_range(at, Point(line - 1, column))
        if node is None or node.start_point != at or data[node.start_byte : node.end_byte] != name.encode():
            continue
        parent = node.parent
        if parent is not None and parent.type in ("pair", "pair_pattern") and parent.child_by_field_name("key") == node:
            keys.add((line, column))  # `{ name: value }`, `{ name: local } = obj`: a property's name, not a use
            continue
        scope = _binding_scope(node)
        if scope is not None:
            scopes.append((scope.start_point, scope.end_point))
    return {
        spot
        for spot in spots
        if spot[2] == "r"
        and ((spot[0], spot[1]) in keys or any(start <= (spot[0] - 1, spot[1] - 1) < end for start, end in scopes))
    }


def _declarator_of(key: Node) -> Node | None:
    """The `variable_declarator` whose top-level object pattern has `key` as a property name, else None."""
    holder = key.parent
    if holder is None:
        return None
    if key.type == "shorthand_property_identifier_pattern":
        if holder.type == "object_assignment_pattern":  # `{ name = fallback }`
            holder = holder.parent
    elif (
        key.type == "property_identifier" and holder.type == "pair_pattern" and holder.child_by_field_name("key") == key
    ):
        holder = holder.parent  # `{ name: local }`
    else:
        return None
    if holder is None or holder.type != "object_pattern":
        return None
    declarator = holder.parent
    if (
        declarator is None
        or declarator.type != "variable_declarator"
        or declarator.child_by_field_name("name") != holder
    ):
        return None
    return declarator


def destructured_members(grammar: Grammar, data: bytes, name: str, spots: list[Spot]) -> dict[tuple[int, int], str]:
    """Plain occurrences among `spots`, those of `name`, that name a property in `const { name } = receiver` (or
    `{ name: local }`): a member access of `receiver` (`this`, `obj`, `this.node`) → that receiver, as written; or
    a property of an object that its context types (`_typing_context`) → that context."""
    if not any(role == "r" for _, _, role in spots) or len(data) > _MAX_BYTES:
        return {}
    if re.search(rb"[{,]\s*" + re.escape(name.encode()) + rb"\s*[,}:=]", data) is None:
        return {}  # never a property name in a pattern
    root = _parser(grammar.ts_name).parse(data).root_node
    found: dict[tuple[int, int], str] = {}
    for line, column, role in spots:
        if role != "r":
            continue
        node = root.descendant_for_point_range(Point(line - 1, column - 1), Point(line - 1, column))
        if node is None or node.start_point != (line - 1, column - 1):
            continue
        declarator = _declarator_of(node)
        value = declarator.child_by_field_name("value") if declarator is not None else None
        if value is not None and value.type in ("this", "identifier", "member_expression"):
            found[line, column] = data[value.start_byte : value.end_byte].decode("utf-8", "replace")
        elif context := _typing_context(node, data):
            found[line, column] = context
    return found


def _typing_context(key: Node, data: bytes) -> str:
    """What types the object a property name `key` sits in, as TypeScript's checker reads a JavaScript file:
    `of:xs` for an element of `xs` (`xs.map(({ key }) => ...)`, `for (const { key } of xs)`, `xs.push({ key })`),
    `arg:N:callee` for the object passed as argument N (0-based) of `callee({ key })`, whose parameter's type
    the object takes, `var:v` for `const v = { key }` and `v = { key }` (typed as `v` is), `ret:L` for an object
    returned by the function or method named on line L (its `@returns`), `param:N:L` for parameter N of that
    function written as a pattern (`{ key }`, typed by its `@param`). Empty: none of these."""
    holder = key.parent
    if holder is None:
        return ""
    if key.type == "shorthand_property_identifier_pattern" and holder.type == "object_assignment_pattern":
        holder = holder.parent  # `{ key = fallback }`
    elif key.type == "property_identifier" and holder.type in ("pair", "pair_pattern"):
        holder = holder.parent if holder.child_by_field_name("key") == key else None
    elif key.type not in ("shorthand_property_identifier", "shorthand_property_identifier_pattern"):
        return ""
    outer = holder.parent if holder is not None else None
    if holder is None or outer is None:
        return ""
    if holder.type == "object_pattern":
        return _pattern_context(holder, outer, data)
    return _object_context(holder, outer, data) if holder.type == "object" else ""


def _pattern_context(holder: Node, outer: Node, data: bytes) -> str:
    """`_typing_context` of an object pattern: a callback's first parameter, a `for ... of` binding."""
    if outer.type == "assignment_pattern" and outer.child_by_field_name("left") == holder:
        holder, parent = outer, outer.parent  # `({ key } = {}) => ...`
        if parent is None:
            return ""
        outer = parent
    if outer.type == "for_in_statement" and outer.child_by_field_name("left") == holder:
        operator, right = outer.child_by_field_name("operator"), outer.child_by_field_name("right")
        return "of:" + _text(data, right) if operator is not None and operator.type == "of" and right else ""
    if outer.type == "formal_parameters" and outer.parent is not None and (line := _name_line(outer.parent)):
        # `function f(a, { key }) {`: the object the parameter's `@param` (by position) types.
        return f"param:{outer.named_children.index(holder)}:{line}"
    if outer.type == "formal_parameters" and outer.named_children[:1] == [holder]:
        function, arguments = outer.parent, outer.parent.parent if outer.parent is not None else None
        if function is None or arguments is None or function.type not in ("arrow_function", "function_expression"):
            return ""
        call = arguments.parent if arguments.type == "arguments" else None
        callee = call.child_by_field_name("function") if call is not None else None
        if callee is None or callee.type != "member_expression" or arguments.named_children[:1] != [function]:
            return ""
        method, receiver = callee.child_by_field_name("property"), callee.child_by_field_name("object")
        if method is not None and receiver is not None and _text(data, method) in _ELEMENT_CALLBACKS:
            return "of:" + _text(data, receiver)
    return ""


def _object_context(holder: Node, outer: Node, data: bytes) -> str:
    """`_typing_context` of an object literal: a call's argument, a variable's value."""
    if outer.type == "arguments" and outer.parent is not None:
        callee = outer.parent.child_by_field_name("function")
        if callee is None:
            return ""
        if callee.type == "member_expression":
            method, receiver = callee.child_by_field_name("property"), callee.child_by_field_name("object")
            if method is not None and receiver is not None and _text(data, method) in ("push", "unshift"):
                return "of:" + _text(data, receiver)
        return f"arg:{outer.named_children.index(holder)}:{_text(data, callee)}"
    if outer.type == "variable_declarator" and outer.child_by_field_name("value") == holder:
        name = outer.child_by_field_name("name")
        return "var:" + _text(data, name) if name is not None and name.type == "identifier" else ""
    if outer.type == "assignment_expression" and outer.child_by_field_name("right") == holder:
        left = outer.child_by_field_name("left")  # `this.html = { ... }`: typed as the field is
        return (
            "var:" + _text(data, left) if left is not None and left.type in ("identifier", "member_expression") else ""
        )
    if outer.type == "return_statement":
        function = outer.parent
        while function is not None and function.type not in _FUNCTIONS:
            function = function.parent
        line = _name_line(function) if function is not None else 0
        return f"ret:{line}" if line else ""  # the `@returns` of the named function it returns from
    return ""


def _name_line(function: Node) -> int:
    """The (1-based) line of a function declaration's or method's name; 0 for an anonymous function."""
    if function.type not in ("function_declaration", "method_definition", "generator_function_declaration"):
        return 0
    name = function.child_by_field_name("name")
    return name.start_point[0] + 1 if name is not None else 0


def _text(data: bytes, node: Node) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")
