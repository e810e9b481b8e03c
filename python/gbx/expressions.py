"""Reward and episode-end expressions compiled into the kernel.

``gbx.VecEnv(..., reward=EXPR, done=EXPR, track=[EXPR, ...])`` takes C++ *expressions*
(not statements) over a read-only view of each env's machine, evaluated in the kernel after
every step (and after every reset, so ``prev`` starts from the reset state):

===================  ===========================================================
name                 value
===================  ===========================================================
``a f b c d e h l``  8-bit registers after the step
``pc sp``            16-bit registers
``ram(addr)``        the byte at ``addr & 0xFFFF`` in the memory view (no side effects;
                     VRAM and OAM as held even while the PPU locks them)
``ram16(addr)``      ``ram(addr) | ram(addr + 1) << 8`` (little-endian)
``val(i)``           tracked value ``track[i]`` now (reward/done only)
``prev(i)``          ``track[i]`` at the end of the previous step (reward/done only)
``popcount(lo, hi)`` bits set in the bytes ``lo..hi`` (inclusive, integer literals)
``sum(lo, hi)``      sum of the bytes ``lo..hi`` (inclusive, integer literals)
``bcd(addr, n)``     ``n`` (1..8) bytes of big-endian packed BCD from ``addr``
``seen(key)``        1 the first time this episode ``key`` is produced, else 0
                     (``seen_capacity=`` keys, exact; see docs/guide/rewards.md)
``seen_count()``     keys in this episode's set
``hit(i)``           fetches at ``hooks[i]`` during this step (``hooks=[...]``)
===================  ===========================================================

Operators: ``+ - * / & | ^ ~ ! << >> < > <= >= == != && || ?:`` and parentheses; integer
(decimal, ``0x`` hex) and float literals. ``/`` always divides as float, so a division by
zero gives inf instead of killing the process; ``%`` is refused (use ``&`` with a power of
two). Nothing else is accepted: no assignment, ``++``, commas (except between the literal
arguments of popcount, sum and bcd), braces, brackets, strings,
comments, or names outside the table. Each expression is checked before any C++ is
generated, and compiler errors name the expression and its own line (``<reward>:1:...``).

``reward`` is converted to float32 (it replaces the stage's reward_v0); ``done`` is true
when non-zero (``terminated`` in ``step``). Up to 8 ``track`` expressions (float32 each).

Example: reward the increase of a 16-bit score, end the episode when lives reach 0::

    env = gbx.VecEnv(rom, 64, track=["ram16(0xC0A0)"],
                     reward="val(0) - prev(0)", done="ram(0xC0A2) == 0")

The same language evaluated on the host
---------------------------------------

:func:`compile_host` parses an expression once and evaluates it for every env of a
:class:`gbx.VecEnv` from its memory and registers (``read_memory``/``registers``), without a
kernel: :func:`gbx.script`'s ``until`` steps use it, so they work on any backend and need no
compile. Names, operators and literals are the kernel's (``val``/``prev`` excepted: a host
expression has no tracked values), and so are the C++ types: registers and ``ram``/``ram16``
are ``uint32_t``, an integer literal is ``int`` (``u``: ``unsigned``), ``1.5`` is ``double``
and ``1.5f`` ``float``, mixed operands follow C++'s usual arithmetic conversions, and ``a / b``
is ``a / (float)b`` as in the kernel. So ``ram(0xC000) - 1 < 5`` is false when the byte is 0
(the ``uint32_t`` subtraction wraps), on the host as in the kernel.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from . import _native

VIEW_VALUES = ("a", "f", "b", "c", "d", "e", "h", "l", "pc", "sp")
VIEW_FUNCTIONS = ("ram", "ram16")
_TRACKED = ("val", "prev")
_MAX_EXPR_BYTES = 4096
# Longest match first, as engine/src/user_expr.cpp.
_OPS = (
    "<<",
    ">>",
    "<=",
    ">=",
    "==",
    "!=",
    "&&",
    "||",
    "+",
    "-",
    "*",
    "/",
    "&",
    "|",
    "^",
    "~",
    "!",
    "<",
    ">",
    "?",
    ":",
)
_HINT = (
    " (a host expression may use only numbers, operators, parentheses and the view: "
    "ram(addr), ram16(addr), registers a f b c d e h l pc sp)"
)

# C++ arithmetic types of the view: name -> numpy dtype.
_DTYPE = {
    "bool": np.bool_,
    "int": np.int32,
    "unsigned": np.uint32,
    "long": np.int64,
    "unsigned long": np.uint64,
    "float": np.float32,
    "double": np.float64,
}
_RANK = {"int": 1, "unsigned": 1, "long": 2, "unsigned long": 2}
_INTEGRAL = ("bool", "int", "unsigned", "long", "unsigned long")


class _Val:
    """A value of every env (numpy array, or a 0-d array for a constant) and its C++ type."""

    __slots__ = ("v", "t")

    def __init__(self, v, t: str):
        self.v, self.t = v, t


def _promote(x: _Val) -> _Val:  # integral promotion: bool -> int
    return _Val(x.v.astype(np.int32), "int") if x.t == "bool" else x


def _common(t1: str, t2: str) -> str:  # the usual arithmetic conversions (after promotion)
    t1 = "int" if t1 == "bool" else t1
    t2 = "int" if t2 == "bool" else t2
    if "double" in (t1, t2):
        return "double"
    if "float" in (t1, t2):
        return "float"
    if t1 == t2:
        return t1
    u1, u2 = t1.startswith("unsigned"), t2.startswith("unsigned")
    if u1 == u2:
        return t1 if _RANK[t1] >= _RANK[t2] else t2
    u, s = (t1, t2) if u1 else (t2, t1)
    if _RANK[u] >= _RANK[s]:
        return u
    return s  # long holds every unsigned (int) value


def _cast(x: _Val, t: str) -> _Val:
    if x.t == t:
        return x
    v = x.v
    if t in _INTEGRAL and x.t in ("float", "double"):
        v = np.trunc(v).astype(np.int64)  # C++: truncation toward zero
    # Integer to unsigned wraps modulo 2^N, as in C++ (numpy's astype does the same).
    return _Val(np.asarray(v).astype(_DTYPE[t]), t)


class HostExpression:
    """An expression of the reward language, parsed once, evaluated on the host for every env
    of a :class:`gbx.VecEnv` (see the module doc). ``what`` names it in error messages
    (``<what>:line:col: ...``, as the kernel's checker does)."""

    def __init__(self, text: str, what: str = "expr"):
        if not isinstance(text, str):
            raise ValueError(f"<{what}>: an expression is a string, got {type(text).__name__}")
        self.text, self.what = text, what
        # The kernel's checker decides what the language accepts (engine/src/user_expr.cpp, on
        # the names this evaluator implements); the parser below adds syntax and C++ types.
        _native.check_expression(text, what, only=list(VIEW_FUNCTIONS + VIEW_VALUES))
        self._toks = _tokenize(text, what)
        self._pos = 0
        self._uses_registers = False
        self._fn = self._ternary()
        if self._pos != len(self._toks):
            self._fail(self._toks[self._pos], f"unexpected '{self._toks[self._pos][1]}'")
        del self._toks
        # The C++ types are static: an operand a C++ compiler would refuse ('~' on a float,
        # '&' with a double) is found now, on a zeroed machine, not at the first evaluation.
        with np.errstate(all="ignore"):
            self._fn(_ZeroContext())

    def __repr__(self) -> str:
        return f"HostExpression({self.text!r})"

    def evaluate(self, env) -> np.ndarray:
        """The expression's value in every env now: an array of ``env.num_envs`` values of the
        expression's C++ type (``bool``, ``int32``, ``uint32``, ``float32`` ...)."""
        ctx = _Context(env, self._uses_registers)
        with np.errstate(all="ignore"):  # float division by zero gives inf, as in the kernel
            r = self._fn(ctx)
        return np.broadcast_to(r.v, (env.num_envs,)).copy()

    def truth(self, env) -> np.ndarray:
        """bool[num_envs]: where the expression is non-zero (as ``done``)."""
        return self.evaluate(env) != 0

    # -- parser (C++ precedence; every operator but ?: left-associative) ------------------

    def _fail(self, tok, why: str):
        raise ValueError(f"<{self.what}>:{tok[2]}:{tok[3]}: {why}{_HINT}")

    def _peek(self):
        return self._toks[self._pos] if self._pos < len(self._toks) else None

    def _next(self, expect: str | None = None):
        tok = self._peek()
        if tok is None:
            last = self._toks[-1]
            end = ("", "", last[2], last[3] + len(last[1]))
            self._fail(
                end, "unexpected end of expression" + (f" (expected '{expect}')" if expect else "")
            )
        if expect is not None and tok[1] != expect:
            self._fail(tok, f"expected '{expect}', got '{tok[1]}'")
        self._pos += 1
        return tok

    _LEVELS = (
        ("||",),
        ("&&",),
        ("|",),
        ("^",),
        ("&",),
        ("==", "!="),
        ("<", ">", "<=", ">="),
        ("<<", ">>"),
        ("+", "-"),
        ("*", "/"),
    )

    def _ternary(self):
        cond = self._binary(0)
        tok = self._peek()
        if tok is None or tok[1] != "?":
            return cond
        self._next("?")
        yes = self._ternary()
        self._next(":")
        no = self._ternary()

        def f(ctx):
            c, y, n = cond(ctx), yes(ctx), no(ctx)
            t = "bool" if y.t == n.t == "bool" else _common(y.t, n.t)
            return _Val(np.where(c.v != 0, _cast(y, t).v, _cast(n, t).v), t)

        return f

    def _binary(self, level: int):
        if level == len(self._LEVELS):
            return self._unary()
        left = self._binary(level + 1)
        ops = self._LEVELS[level]
        while (tok := self._peek()) is not None and tok[0] == "op" and tok[1] in ops:
            self._next()
            right = self._binary(level + 1)
            left = _binop(tok, left, right, self)
        return left

    def _unary(self):
        tok = self._peek()
        if tok is not None and tok[0] == "op" and tok[1] in ("+", "-", "!", "~"):
            self._next()
            x = self._unary()
            return _unop(tok, x, self)
        return self._primary()

    def _primary(self):
        tok = self._next()
        kind, text = tok[0], tok[1]
        if kind == "(":
            inner = self._ternary()
            self._next(")")
            return inner
        if kind == "num":
            val = _literal(tok, self)
            return lambda ctx: val
        if kind == "name":
            called = (nxt := self._peek()) is not None and nxt[0] == "("
            if text in VIEW_FUNCTIONS:
                if not called:
                    self._fail(tok, f"{text} must be called: {text}(addr)")
                self._next("(")
                if (nxt := self._peek()) is not None and nxt[0] == ")":
                    self._fail(nxt, f"{text}(addr) takes one address")
                arg = self._ternary()
                self._next(")")
                width = 2 if text == "ram16" else 1

                def f(ctx):
                    a = _cast(arg(ctx), "unsigned").v
                    lo = ctx.ram(a)
                    if width == 1:
                        return _Val(lo, "unsigned")
                    return _Val(lo | (ctx.ram(a + np.uint32(1)) << np.uint32(8)), "unsigned")

                return f
            if text in VIEW_VALUES:
                if called:
                    self._fail(tok, f"{text} is a value, not a function")
                self._uses_registers = True
                return lambda ctx: _Val(ctx.register(text), "unsigned")
            if text in _TRACKED:
                self._fail(tok, f"{text}(i) is only available in reward and done")
            self._fail(tok, f"unknown name '{text}'")
        self._fail(tok, f"unexpected '{text}'")


def compile_host(text: str, what: str = "expr") -> HostExpression:
    """Parses ``text`` (the reward language) for evaluation on the host; a ValueError names
    the position (``<what>:1:7: ...``) of what is wrong."""
    return HostExpression(text, what)


class _Context:
    """One evaluation's reads: each memory range and the registers read once."""

    def __init__(self, env, registers: bool):
        self.env = env
        self.n = env.num_envs
        self.reads: dict[tuple[int, int], np.ndarray] = {}
        self.regs = env.registers() if registers else None

    def register(self, name: str) -> np.ndarray:
        return self.regs[name].astype(np.uint32)

    def ram(self, addr: np.ndarray) -> np.ndarray:
        a = np.asarray(addr, dtype=np.uint32) & np.uint32(0xFFFF)
        lo, hi = int(a.min()), int(a.max()) + 1
        block = self.reads.get((lo, hi))
        if block is None:
            block = self.reads[(lo, hi)] = self.env.read_memory(lo, hi)
        if a.ndim == 0:
            return block[:, 0].astype(np.uint32)
        return block[np.arange(self.n), a - lo].astype(np.uint32)


class _ZeroContext(_Context):
    """One env whose memory and registers are all zero (the parse-time type check)."""

    def __init__(self):
        self.n = 1

    def register(self, name: str) -> np.ndarray:
        return np.zeros(1, dtype=np.uint32)

    def ram(self, addr: np.ndarray) -> np.ndarray:
        return np.zeros(np.shape(addr), dtype=np.uint32)


_NUM = re.compile(r"(0[xX][0-9a-fA-F]*|[0-9.]+(?:[eE][+-]?[0-9]*)?)([uUfF]*)")


def _tokenize(text: str, what: str) -> list[tuple]:
    """(kind, text, line, col) tokens of a text the kernel's checker accepted."""

    def fail(line, col, why):
        raise ValueError(f"<{what}>:{line}:{col}: {why}{_HINT}")

    if len(text.encode()) > _MAX_EXPR_BYTES:
        fail(1, 1, f"expression longer than {_MAX_EXPR_BYTES} bytes")
    toks, i, line, col = [], 0, 1, 1
    while i < len(text):
        c = text[i]
        n = 1
        if c in " \t\r\n":
            pass
        elif c.isdigit() or (c == "." and text[i + 1 : i + 2].isdigit()):
            m = _NUM.match(text, i)
            n = m.end() - i
            if text[i + n : i + n + 1].isalnum() or text[i + n : i + n + 1] in ("_", "."):
                fail(line, col, f"malformed number '{text[i : i + n + 1]}'")
            toks.append(("num", text[i : i + n], line, col))
        elif c.isalpha() or c == "_":
            m = re.compile(r"[A-Za-z0-9_]+").match(text, i)
            n = m.end() - i
            toks.append(("name", text[i : i + n], line, col))
        elif c in "()":
            toks.append((c, c, line, col))
        elif text.startswith(("//", "/*"), i):
            fail(line, col, "comments are not allowed")
        else:
            op = next((o for o in _OPS if text.startswith(o, i)), None)
            n = len(op) if op else 1
            if (
                op is None
                or text[i + n : i + n + 1] == "="
                or (c in "+-" and text[i + 1 : i + 2] == c)
            ):
                fail(line, col, f"'{c}' is not allowed here")
            toks.append(("op", op, line, col))
        for ch in text[i : i + n]:
            line, col = (line + 1, 1) if ch == "\n" else (line, col + 1)
        i += n
    if not toks:
        fail(1, 1, "empty expression")
    return toks


def _literal(tok, expr: HostExpression) -> _Val:
    m = _NUM.fullmatch(tok[1])
    body, suffix = m.group(1), m.group(2).lower()
    is_hex = body[:2] in ("0x", "0X")
    is_float = not is_hex and ("." in body or "e" in body.lower())
    try:
        if is_hex and len(body) == 2:
            raise ValueError("hex literal without digits")
        if is_float:
            if suffix not in ("", "f"):
                raise ValueError
            t = "float" if suffix == "f" else "double"
            return _Val(np.asarray(float(body), dtype=_DTYPE[t]), t)
        if suffix not in ("", "u"):
            raise ValueError
        # C++: a leading 0 makes it octal (010 == 8), as the kernel's compiler reads it.
        v = int(body, 16) if is_hex else int(body, 8) if body.startswith("0") else int(body)
    except ValueError as e:
        why = str(e)
        expr._fail(tok, why if why.startswith("hex") else f"malformed number '{tok[1]}'")
    # C++: decimal int -> long; hex/octal int -> unsigned -> long -> unsigned long; with 'u'
    # unsigned -> unsigned long.
    order = (
        ("unsigned", "unsigned long")
        if suffix == "u"
        else ("int", "unsigned", "long", "unsigned long")
        if body.startswith("0")
        else ("int", "long")
    )
    limits = {
        "int": 2**31 - 1,
        "unsigned": 2**32 - 1,
        "long": 2**63 - 1,
        "unsigned long": 2**64 - 1,
    }
    for t in order:
        if v <= limits[t]:
            return _Val(np.asarray(v, dtype=_DTYPE[t]), t)
    expr._fail(tok, f"integer literal {tok[1]} too large")


def _need_integral(tok, expr, *vals):
    for x in vals:
        if x.t not in _INTEGRAL:
            expr._fail(tok, f"'{tok[1]}' needs integer operands (C++), got {x.t}")


def _unop(tok, x: Callable, expr: HostExpression) -> Callable:
    op = tok[1]

    def f(ctx):
        v = x(ctx)
        if op == "!":
            return _Val(v.v == 0, "bool")
        if op == "~":
            _need_integral(tok, expr, v)
        p = _promote(v)
        if op == "+":
            return p
        if op == "-":
            return _Val(np.negative(p.v), p.t)
        return _Val(np.invert(p.v), p.t)

    return f


def _binop(tok, left: Callable, right: Callable, expr: HostExpression) -> Callable:
    op = tok[1]

    def f(ctx):
        a, b = left(ctx), right(ctx)
        if op in ("&&", "||"):
            x, y = a.v != 0, b.v != 0
            return _Val(x & y if op == "&&" else x | y, "bool")
        if op == "/":  # emitted as a / (float) b
            b = _cast(b, "float")
        if op in ("<<", ">>"):
            _need_integral(tok, expr, a, b)
            a = _promote(a)
            cnt = _promote(b).v.astype(np.int64) & (63 if a.t in ("long", "unsigned long") else 31)
            fn = np.left_shift if op == "<<" else np.right_shift
            return _Val(fn(a.v, cnt.astype(a.v.dtype)), a.t)
        if op in ("&", "|", "^"):
            _need_integral(tok, expr, a, b)
        t = _common(a.t, b.t)
        x, y = _cast(a, t).v, _cast(b, t).v
        if op in ("<", ">", "<=", ">=", "==", "!="):
            fn = {
                "<": np.less,
                ">": np.greater,
                "<=": np.less_equal,
                ">=": np.greater_equal,
                "==": np.equal,
                "!=": np.not_equal,
            }[op]
            return _Val(fn(x, y), "bool")
        fn = {
            "+": np.add,
            "-": np.subtract,
            "*": np.multiply,
            "/": np.divide,
            "&": np.bitwise_and,
            "|": np.bitwise_or,
            "^": np.bitwise_xor,
        }[op]
        return _Val(np.asarray(fn(x, y)).astype(_DTYPE[t], copy=False), t)

    return f
