"""Shared pieces of the ported TF tests.

TF's backprop_test calls the convenience wrappers of ``tensorflow/python/eager/backprop.py``
(``gradients_function``, ``val_and_grad_function``, ``implicit_grad``, ``make_vjp``) — private API.
They are thin layers over ``GradientTape``; here they are rewritten on the public tape API with the
same behaviour (distinct source objects, identity-wrapped outputs, gradients summed over flattened
outputs, implicit gradients over ``watched_variables()``), so the tests that use them run unchanged
otherwise. ``compute_gradient`` plays the part of ``tf.test.compute_gradient`` (tapejax has no
``tf.test``): jacobians are [y_size, x_size], the theoretical one by reverse mode, the numerical one by
central differences.
"""

import numpy as np


def to_np(x):
    """Nested structure of tensors/variables/numbers -> the same structure of numpy arrays (None kept)."""
    if x is None:
        return None
    if isinstance(x, dict):
        return {k: to_np(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(to_np(v) for v in x) if not hasattr(x, "_fields") else type(x)(*(to_np(v) for v in x))
    if hasattr(x, "numpy"):
        return np.asarray(x.numpy())
    return np.asarray(x)


def assert_close(actual, expected, rtol=1e-6, atol=1e-6):
    """assertAllClose for nested structures; None must match None."""
    a, e = to_np(actual), to_np(expected)
    _cmp(a, e, rtol, atol, path="")


def _cmp(a, e, rtol, atol, path):
    if e is None or a is None:
        assert a is None and e is None, f"at {path or 'top'}: {a!r} vs {e!r}"
        return
    if isinstance(e, dict):
        assert isinstance(a, dict) and set(a) == set(e), f"at {path}: keys {a!r} vs {e!r}"
        for k in e:
            _cmp(a[k], e[k], rtol, atol, f"{path}[{k!r}]")
        return
    if isinstance(e, (list, tuple)):
        homogeneous = not _holds_none_or_dict(e)
        if homogeneous:
            try:
                e_arr = np.asarray(e, dtype=np.float64)
            except (ValueError, TypeError):
                homogeneous = False
        if not homogeneous:
            assert isinstance(a, (list, tuple)) and len(a) == len(e), f"at {path}: {a!r} vs {e!r}"
            for i, (av, ev) in enumerate(zip(a, e)):
                _cmp(av, ev, rtol, atol, f"{path}[{i}]")
            return
        e = e_arr
    if isinstance(a, (list, tuple)):
        assert not _holds_none_or_dict(a), f"at {path or 'top'}: {a!r} vs {e!r}"
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(e, dtype=np.float64),
                               rtol=rtol, atol=atol, err_msg=f"at {path or 'top'}")


def _holds_none_or_dict(x):
    if x is None or isinstance(x, dict):
        return True
    return isinstance(x, (list, tuple)) and any(_holds_none_or_dict(v) for v in x)


def _ensure_unique(tf, positions, args):
    seen = set()
    args = list(args)
    for i in positions:
        # TF's make_vjp converts every differentiated argument (a variable is read into a tensor).
        t = tf.convert_to_tensor(args[i])
        if id(t) in seen:
            t = tf.identity(t)
        seen.add(id(t))
        args[i] = t
    return args


def make_vjp(tf, f, params=None, persistent=True):
    def decorated(*args):
        positions = list(range(len(args))) if params is None else list(params)
        with tf.GradientTape(persistent=persistent) as tape:
            args = _ensure_unique(tf, positions, args)
            sources = []
            for i in positions:
                tape.watch(args[i])
                sources.append(args[i])
            result = f(*args)
            if result is None:
                raise ValueError("Cannot differentiate a function that returns None; "
                                 f"did you forget to return a value from {f.__name__}?")
            flat = [tf.identity(x) for x in tf.nest.flatten(result)]
            result = tf.nest.pack_sequence_as(result, flat)

        def vjp(dy=None):
            if dy is not None:
                dy = [tf.convert_to_tensor(x) for x in tf.nest.flatten(dy)]
            return tape.gradient(flat, sources, output_gradients=dy)

        return result, vjp

    return decorated


def val_and_grad_function(tf, f, params=None):
    def decorated(*args, **kwds):
        dy = kwds.pop("dy", None)
        assert not kwds
        val, vjp = make_vjp(tf, f, params)(*args)
        return val, vjp(dy=dy)

    return decorated


def gradients_function(tf, f, params=None):
    def decorated(*args, **kwds):
        return val_and_grad_function(tf, f, params)(*args, **kwds)[1]

    return decorated


def implicit_val_and_grad(tf, f):
    def grad_fn(*args):
        with tf.GradientTape() as tape:
            end = f(*args)
            if end is None:
                raise ValueError("Cannot differentiate a function that returns None")
        variables = tape.watched_variables()
        if not variables:
            raise ValueError("No trainable variables were accessed while the function was being computed.")
        grads = tape.gradient(tf.nest.flatten(end), list(variables))
        return end, list(zip(grads, variables))

    return grad_fn


def implicit_grad(tf, f):
    return lambda *args: implicit_val_and_grad(tf, f)(*args)[1]


def compute_gradient(tf, f, xs, delta=1e-3):
    """(theoretical, numerical) jacobians of f at xs, each a tuple of [y_size, x_size] arrays."""
    xs = [tf.convert_to_tensor(x) for x in xs]
    y = f(*xs)
    y_size = int(np.prod(y.shape))
    theoretical = [np.zeros((y_size, int(np.prod(x.shape))), np.float64) for x in xs]
    for j in range(y_size):
        dy = np.zeros(y_size, np.float32)
        dy[j] = 1.0
        with tf.GradientTape() as tape:
            tape.watch(xs)
            yy = f(*xs)
        grads = tape.gradient(yy, xs, output_gradients=tf.reshape(tf.constant(dy, yy.dtype), tf.shape(yy)),
                              unconnected_gradients="zero")
        for k, g in enumerate(grads):
            theoretical[k][j] = np.reshape(tf.convert_to_tensor(g).numpy(), [-1])
    numerical = []
    for k, x in enumerate(xs):
        base = x.numpy()
        flat = base.reshape(-1)
        jac = np.zeros((y_size, flat.size), np.float64)
        for i in range(flat.size):
            plus, minus = flat.copy(), flat.copy()
            plus[i] += delta
            minus[i] -= delta
            args_p = list(xs)
            args_m = list(xs)
            args_p[k] = tf.constant(plus.reshape(base.shape))
            args_m[k] = tf.constant(minus.reshape(base.shape))
            yp = np.reshape(f(*args_p).numpy(), [-1]).astype(np.float64)
            ym = np.reshape(f(*args_m).numpy(), [-1]).astype(np.float64)
            jac[:, i] = (yp - ym) / (2 * delta)
        numerical.append(jac)
    return tuple(theoretical), tuple(numerical)
