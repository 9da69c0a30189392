"""Random programs for autograph: nested if/while/for over tensors (and Python values), with
break/continue/return, as Python source. Each program is run converted-and-compiled by
``tapejax.function`` and as plain eager Python; the two must agree."""

from __future__ import annotations

import linecache
import random

EXPRS = [
    "a * 0.5 + b", "b - a * 0.25", "tf.sin(a) + 1.0", "tf.tanh(b) * 2.0", "a + 1.0", "b * 0.9 - 0.1",
    "a * b * 0.1", "tf.cos(b) - a * 0.3", "a + tf.cast(k, tf.float32) * 0.1",
]
CONDS = ["a > b", "a > 0.5", "b < 0.0", "a + b > 1.0", "tf.sin(a) > 0.0", "(a > 0.0) and (b > 0.0)",
         "(a < 0.0) or (b > 1.0)", "not (a > b)"]


class Gen:
    def __init__(self, seed: int):
        self.r = random.Random(seed)
        self.n = 0
        self.lines: list[str] = []

    def fresh(self, p: str) -> str:
        self.n += 1
        return f"{p}{self.n}"

    def emit(self, ind: int, s: str) -> None:
        self.lines.append("    " * ind + s)

    def block(self, ind: int, depth: int, in_loop: bool, allow_return: bool) -> None:
        for _ in range(self.r.randint(1, 3)):
            self.stmt(ind, depth, in_loop, allow_return)

    def stmt(self, ind: int, depth: int, in_loop: bool, allow_return: bool) -> None:
        r = self.r
        choices = ["assign", "assign"]
        if depth < 3:
            choices += ["if", "pyif", "while", "for_range", "for_tensor", "for_py"]
        if in_loop:
            choices += ["break", "continue"]
        if allow_return and not in_loop and depth == 0:
            # Only where TF accepts it: both branches return (a return in one branch of a
            # nested tensor `if` is TF's "must also have a return statement" error).
            choices += ["return"]
        choices += ["var", "builtin_cast", "check", "nest"]
        if r.random() < 0.08:
            # A data-dependent shape: the compiled function runs that call eagerly (one warning).
            choices.append("data_dependent")
        c = r.choice(choices)
        if c == "var":
            # Variable state inside branches and loops: every assign runs in program order.
            self.emit(ind, r.choice(["acc.assign_add(a * 0.1)", "acc.assign(acc * 0.5 + b)", "a = a + acc * 0.01"]))
        elif c == "nest":
            # A nested loop variable (a tuple holding a dict), carried through loops and branches.
            self.emit(ind, r.choice(['st = (st[0] + a * 0.1, {"c": st[1]["c"] * 0.5 + b})',
                                     'st = (st[1]["c"] - 0.2, {"c": st[0] * 0.9})']))
        elif c == "check":
            # tf.debugging checks: a failure raises InvalidArgumentError eagerly, and when the
            # compiled call returns (TF's graph raises when it runs the check).
            self.emit(ind, r.choice(["tf.debugging.check_numerics(tf.math.log(a + 1.5), 'log of a')",
                                     "tf.debugging.assert_less(a, 2.5, message='a too big')",
                                     "tf.debugging.assert_greater(b, -4.0)",
                                     "tf.debugging.check_numerics(b * 1e38 * 1e38, 'b overflows')"]))
        elif c == "builtin_cast":
            # int(t) / float(t) of tensors: casts in the converted code, Python numbers eagerly.
            self.emit(ind, r.choice(["a = a * 0.5 + float(tf.reduce_sum(v)) * 0.1",
                                     "b = b + float(n) * 0.01",
                                     "a = a + tf.cast(int(n) % 2, tf.float32) * 0.1"]))
        elif c == "data_dependent":
            self.emit(ind, r.choice(["b = b + tf.reduce_sum(tf.boolean_mask(v, v > a)) * 0.1",
                                     "a = a + tf.cast(tf.size(tf.unique(tf.cast(v * 2.0, tf.int32))[0]), tf.float32) * 0.1"]))
        elif c == "assign":
            self.emit(ind, f"{r.choice('ab')} = {r.choice(EXPRS)}")
        elif c == "if":
            self.emit(ind, f"if {r.choice(CONDS)}:")
            self.block(ind + 1, depth + 1, in_loop, allow_return)
            if r.random() < 0.6:
                self.emit(ind, "else:")
                self.block(ind + 1, depth + 1, in_loop, allow_return)
        elif c == "pyif":
            self.emit(ind, f"if k > {r.randint(0, 3)}:")
            self.block(ind + 1, depth + 1, in_loop, allow_return)
        elif c == "while":
            i = self.fresh("i")
            self.emit(ind, f"{i} = tf.constant(0)")
            self.emit(ind, f"while {i} < n:")
            self.emit(ind + 1, f"{i} += 1")
            self.block(ind + 1, depth + 1, True, False)
        elif c == "for_range":
            j = self.fresh("j")
            # Ranges with a step known at trace time (up or down: one compare per iteration) and
            # one whose sign is known only at run time (a tensor step).
            rng = r.choice(["tf.range(n)", "tf.range(n)", "tf.range(1, n + 2, 2)", "tf.range(n, 0, -1)",
                            "tf.range(n, -1, tf.constant(-2))", "range(n)", "tf.range(0, n, tf.sign(n) + 1)"])
            self.emit(ind, f"for {j} in {rng}:")
            self.emit(ind + 1, f"a = a + tf.cast({j}, tf.float32) * 0.01")
            self.block(ind + 1, depth + 1, True, False)
        elif c == "for_tensor":
            e = self.fresh("e")
            self.emit(ind, f"for {e} in v:")
            self.emit(ind + 1, f"b = b * 0.8 + {e} * 0.1")
            self.block(ind + 1, depth + 1, True, False)
        elif c == "for_py":
            p = self.fresh("p")
            bound = r.choice([str(r.randint(1, 3)), str(r.randint(1, 3)), "int(n)"])
            self.emit(ind, f"for {p} in range({bound}):")
            self.block(ind + 1, depth + 1, True, False)
        elif c == "break":
            self.emit(ind, f"if {r.choice(CONDS)}:")
            self.emit(ind + 1, "break")
        elif c == "continue":
            self.emit(ind, f"if {r.choice(CONDS)}:")
            self.emit(ind + 1, "continue")
        elif c == "return":
            self.emit(ind, f"if {r.choice(CONDS)}:")
            self.emit(ind + 1, "return a * 2.0 + b")
            self.emit(ind, "else:")
            self.emit(ind + 1, "return a - b")

    def program(self) -> str:
        self.lines = ["def prog(a, b, n, v, k, acc):", '    st = (a * 0.0, {"c": b * 0.0})']
        self.block(1, 0, False, True)
        self.emit(1, 'return a + b * 3.0 + st[0] * 0.5 + st[1]["c"]')
        return "\n".join(self.lines) + "\n"


def make(seed: int, tf) -> tuple[str, object]:
    src = Gen(seed).program()
    filename = f"<autograph-random-{seed}>"
    # Registered with linecache so that inspect.getsource (and so autograph) can read it.
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns: dict = {"tf": tf}
    exec(compile(src, filename, "exec"), ns)  # noqa: S102  (generated test program)
    return src, ns["prog"]
