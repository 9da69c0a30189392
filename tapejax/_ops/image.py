"""``tf.image``: resizing (TF 2's half-pixel bilinear / nearest) and the geometric ops, all
differentiable on the tape."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core._recorder import Tensor, bind
from ._machinery import _as_t, _export, prim

__all__ = ["resize", "flip_left_right", "flip_up_down", "transpose", "rot90", "adjust_brightness",
           "rgb_to_grayscale", "central_crop"]


def _check_image(t: Tensor, op: str) -> int:
    nd = t._value.ndim
    if nd not in (3, 4):
        raise ValueError(f"'image' (shape {list(t._value.shape)}) must have either 3 or 4 dimensions.")
    return nd


def _resize_impl(x: Any, h: int, w: int, method: str) -> Any:
    # TF 2's resize: half-pixel centers and no antialiasing by default (jax.image.resize
    # antialiases a downscale unless told not to).
    shape = x.shape[:-3] + (h, w, x.shape[-1])
    if method == "nearest":
        return jax.image.resize(x, shape, "nearest")
    return jax.image.resize(x.astype(jnp.float32) if x.dtype != jnp.float64 else x, shape, "linear", antialias=False)


_resize_p = prim("resize", _resize_impl)


def resize(images: Any, size: Any, method: str = "bilinear", preserve_aspect_ratio: bool = False,
           antialias: bool = False, name: str | None = None) -> Tensor:
    """Resize images (``[h, w, c]`` or ``[b, h, w, c]``) to ``size``, as ``tf.image.resize``.

    ``method``: ``"bilinear"`` (float32 result) or ``"nearest"`` (the input dtype), with TF 2's
    half-pixel centers.

    Example:
        >>> import tapejax as tf
        >>> tf.image.resize(tf.constant([[[0.0], [1.0]]]), [1, 4])[0, :, 0].numpy().tolist()
        [0.0, 0.25, 0.75, 1.0]
    """
    t = _as_t(images)
    _check_image(t, "resize")
    method = getattr(method, "value", method)
    if method not in ("bilinear", "nearest"):
        raise NotImplementedError(f"tf.image.resize method {method!r}: tapejax supports 'bilinear' and 'nearest'.")
    if antialias:
        raise NotImplementedError("tf.image.resize(antialias=True) is not supported by tapejax; resize without it.")
    h, w = (int(s) for s in np.asarray(size).reshape(-1))
    if h <= 0 or w <= 0:
        raise ValueError(f"'size' must be 1-D of 2 positive elements: new_height, new_width, got {[h, w]}")
    if preserve_aspect_ratio:
        ih, iw = t._value.shape[-3], t._value.shape[-2]
        scale = min(h / ih, w / iw)
        h, w = int(round(ih * scale)), int(round(iw * scale))
    return bind(_resize_p, t, h=h, w=w, method=method)


class ResizeMethod:
    """Names of ``tf.image.resize`` methods."""

    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"


_flip_p = prim("image_flip", lambda x, axis: jnp.flip(x, axis))


def flip_left_right(image: Any) -> Tensor:
    """Mirror the width axis, as ``tf.image.flip_left_right``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.flip_left_right(tf.constant([[[1.0], [2.0]]]))[0, :, 0].numpy().tolist()
        [2.0, 1.0]
    """
    t = _as_t(image)
    _check_image(t, "flip_left_right")
    return bind(_flip_p, t, axis=t._value.ndim - 2)


def flip_up_down(image: Any) -> Tensor:
    """Mirror the height axis, as ``tf.image.flip_up_down``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.flip_up_down(tf.constant([[[1.0]], [[2.0]]]))[:, 0, 0].numpy().tolist()
        [2.0, 1.0]
    """
    t = _as_t(image)
    _check_image(t, "flip_up_down")
    return bind(_flip_p, t, axis=t._value.ndim - 3)


_transpose_p = prim("image_transpose", lambda x: jnp.swapaxes(x, -3, -2))


def transpose(image: Any, name: str | None = None) -> Tensor:
    """Swap height and width, as ``tf.image.transpose``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.transpose(tf.ones((2, 3, 1))).shape
        TensorShape([3, 2, 1])
    """
    t = _as_t(image)
    _check_image(t, "transpose")
    return bind(_transpose_p, t)


_rot90_p = prim("image_rot90", lambda x, k: jnp.rot90(x, k, axes=(x.ndim - 3, x.ndim - 2)))


def rot90(image: Any, k: int = 1, name: str | None = None) -> Tensor:
    """Rotate counter-clockwise by ``k`` quarter turns, as ``tf.image.rot90``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.rot90(tf.constant([[[1.0], [2.0]], [[3.0], [4.0]]]))[..., 0].numpy().tolist()
        [[2.0, 4.0], [1.0, 3.0]]
    """
    t = _as_t(image)
    _check_image(t, "rot90")
    return bind(_rot90_p, t, k=int(k) % 4)


_brightness_p = prim("adjust_brightness", lambda x, d: x + d)


def adjust_brightness(image: Any, delta: float) -> Tensor:
    """Add ``delta`` to every pixel (float images), as ``tf.image.adjust_brightness``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.adjust_brightness(tf.zeros((1, 1, 1)), 0.5).numpy().ravel().tolist()
        [0.5]
    """
    t = _as_t(image)
    if t._value.dtype.kind != "f":
        raise NotImplementedError("tapejax's adjust_brightness takes float images; convert with tf.cast first.")
    return bind(_brightness_p, t, Tensor(jnp.asarray(delta, t._value.dtype)))


_gray_p = prim("rgb_to_grayscale",
               lambda x: jnp.sum(x * jnp.asarray([0.2989, 0.587, 0.114], x.dtype), axis=-1, keepdims=True))


def rgb_to_grayscale(images: Any, name: str | None = None) -> Tensor:
    """Luma (TF's weights 0.2989, 0.587, 0.114) of float RGB images, as ``tf.image.rgb_to_grayscale``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.rgb_to_grayscale(tf.ones((1, 1, 3))).shape
        TensorShape([1, 1, 1])
    """
    t = _as_t(images)
    if t._value.dtype.kind != "f":
        raise NotImplementedError("tapejax's rgb_to_grayscale takes float images; convert with tf.cast first.")
    return bind(_gray_p, t)


_crop_p = prim("central_crop", lambda x, h0, h1, w0, w1: x[..., h0:h1, w0:w1, :])


def central_crop(image: Any, central_fraction: float) -> Tensor:
    """The central part of each image, as ``tf.image.central_crop``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.central_crop(tf.ones((4, 4, 1)), 0.5).shape
        TensorShape([2, 2, 1])
    """
    t = _as_t(image)
    _check_image(t, "central_crop")
    if not 0.0 < central_fraction <= 1.0:
        raise ValueError("central_fraction must be within (0, 1]")
    h, w = t._value.shape[-3], t._value.shape[-2]
    # TF: start = int((dim - dim * fraction) / 2), size = dim - 2 * start.
    sh, sw = int((h - h * central_fraction) / 2), int((w - w * central_fraction) / 2)
    return bind(_crop_p, t, h0=sh, h1=h - sh, w0=sw, w1=w - sw)


for _f in (resize, flip_left_right, flip_up_down, transpose, rot90, adjust_brightness, rgb_to_grayscale, central_crop):
    _export(_f, f"image.{_f.__name__}")
EXPORTS_EXTRA = {"ResizeMethod": ResizeMethod}
