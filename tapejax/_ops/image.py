"""``tf.image``: resizing (TF 2's half-pixel bilinear / nearest) and the geometric ops, all
differentiable on the tape."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._core._recorder import Tensor, bind
from ._dtypes import as_dtype
from ._machinery import _as_t, _export, prim

__all__ = [
    "adjust_brightness",
    "adjust_contrast",
    "central_crop",
    "convert_image_dtype",
    "crop_to_bounding_box",
    "flip_left_right",
    "flip_up_down",
    "grayscale_to_rgb",
    "pad_to_bounding_box",
    "per_image_standardization",
    "resize",
    "resize_with_crop_or_pad",
    "rgb_to_grayscale",
    "rot90",
    "transpose",
]


def _check_image(t: Tensor, op: str) -> int:
    nd = t._aval.ndim
    if nd not in (3, 4):
        raise ValueError(f"'image' (shape {list(t._aval.shape)}) must have either 3 or 4 dimensions.")
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
        ih, iw = t._aval.shape[-3], t._aval.shape[-2]
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
    return bind(_flip_p, t, axis=t._aval.ndim - 2)


def flip_up_down(image: Any) -> Tensor:
    """Mirror the height axis, as ``tf.image.flip_up_down``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.flip_up_down(tf.constant([[[1.0]], [[2.0]]]))[:, 0, 0].numpy().tolist()
        [2.0, 1.0]
    """
    t = _as_t(image)
    _check_image(t, "flip_up_down")
    return bind(_flip_p, t, axis=t._aval.ndim - 3)


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
    if t._aval.dtype.kind != "f":
        raise NotImplementedError("tapejax's adjust_brightness takes float images; convert with tf.cast first.")
    return bind(_brightness_p, t, Tensor(jnp.asarray(delta, t._aval.dtype)))


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
    if t._aval.dtype.kind != "f":
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
    h, w = t._aval.shape[-3], t._aval.shape[-2]
    # TF: start = int((dim - dim * fraction) / 2), size = dim - 2 * start.
    sh, sw = int((h - h * central_fraction) / 2), int((w - w * central_fraction) / 2)
    return bind(_crop_p, t, h0=sh, h1=h - sh, w0=sw, w1=w - sw)


def _hw(t: Tensor) -> tuple[int, int]:
    return t._aval.shape[-3], t._aval.shape[-2]


def crop_to_bounding_box(image: Any, offset_height: int, offset_width: int, target_height: int,
                         target_width: int) -> Tensor:
    """The ``target_height x target_width`` box at the offsets, as ``tf.image.crop_to_bounding_box``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.crop_to_bounding_box(tf.ones((4, 5, 1)), 1, 2, 2, 3).shape
        TensorShape([2, 3, 1])
    """
    t = _as_t(image)
    _check_image(t, "crop_to_bounding_box")
    h, w = _hw(t)
    oh, ow, th, tw = int(offset_height), int(offset_width), int(target_height), int(target_width)
    if oh < 0 or ow < 0:
        raise ValueError("offset_height and offset_width must be >= 0.")
    if th <= 0 or tw <= 0:
        raise ValueError("target_height and target_width must be > 0.")
    if oh + th > h or ow + tw > w:
        raise ValueError("height must be >= target + offset." if oh + th > h else "width must be >= target + offset.")
    return bind(_crop_p, t, h0=oh, h1=oh + th, w0=ow, w1=ow + tw)


_pad_p = prim("image_pad", lambda x, top, bottom, left, right: jnp.pad(
    x, [(0, 0)] * (x.ndim - 3) + [(top, bottom), (left, right), (0, 0)]))


def pad_to_bounding_box(image: Any, offset_height: int, offset_width: int, target_height: int,
                        target_width: int) -> Tensor:
    """Zero-pad to ``target_height x target_width`` with the image at the offsets, as
    ``tf.image.pad_to_bounding_box``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.pad_to_bounding_box(tf.ones((1, 1, 1)), 1, 0, 3, 2)[..., 0].numpy().tolist()
        [[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]]
    """
    t = _as_t(image)
    _check_image(t, "pad_to_bounding_box")
    h, w = _hw(t)
    oh, ow, th, tw = int(offset_height), int(offset_width), int(target_height), int(target_width)
    if oh < 0 or ow < 0:
        raise ValueError("offset_height and offset_width must be >= 0")
    if th < h + oh:
        raise ValueError("height must be <= target - offset")
    if tw < w + ow:
        raise ValueError("width must be <= target - offset")
    return bind(_pad_p, t, top=oh, bottom=th - h - oh, left=ow, right=tw - w - ow)


def resize_with_crop_or_pad(image: Any, target_height: int, target_width: int) -> Tensor:
    """Centrally crop or zero-pad to the target size, as ``tf.image.resize_with_crop_or_pad``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.resize_with_crop_or_pad(tf.ones((4, 2, 1)), 2, 4).shape
        TensorShape([2, 4, 1])
    """
    t = _as_t(image)
    _check_image(t, "resize_with_crop_or_pad")
    h, w = _hw(t)
    th, tw = int(target_height), int(target_width)
    # TF: crop offsets (dim - target) // 2, pad offsets (target - dim) // 2.
    ch, cw = max(h - th, 0) // 2, max(w - tw, 0) // 2
    t = crop_to_bounding_box(t, ch, cw, min(h, th), min(w, tw))
    ph, pw = max(th - h, 0) // 2, max(tw - w, 0) // 2
    return pad_to_bounding_box(t, ph, pw, th, tw)


def _std_impl(x: Any) -> Any:
    x = x.astype(jnp.float32) if not jnp.issubdtype(x.dtype, jnp.floating) else x
    axes = (-3, -2, -1)
    n = x.shape[-3] * x.shape[-2] * x.shape[-1]
    mean = jnp.mean(x, axis=axes, keepdims=True)
    std = jnp.std(x, axis=axes, keepdims=True)
    return (x - mean) / jnp.maximum(std, 1.0 / jnp.sqrt(jnp.asarray(n, x.dtype)))


_std_p = prim("per_image_standardization", _std_impl)


def per_image_standardization(image: Any) -> Tensor:
    """Scale each image to zero mean and unit variance, as ``tf.image.per_image_standardization``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.per_image_standardization(tf.constant([[[1.0], [3.0]]]))[..., 0].numpy().tolist()
        [[-1.0, 1.0]]
    """
    t = _as_t(image)
    _check_image(t, "per_image_standardization")
    return bind(_std_p, t)


# TF registers no gradient for AdjustContrastv2 (its tape raises LookupError): here, as for the
# other such ops of the table, the gradient is None.
_contrast_p = prim("adjust_contrast", lambda x, f: (x - jnp.mean(x, axis=(-3, -2), keepdims=True)) * f
                   + jnp.mean(x, axis=(-3, -2), keepdims=True), differentiable=False)


def adjust_contrast(images: Any, contrast_factor: Any) -> Tensor:
    """``(x - mean) * contrast_factor + mean`` per image and channel, as ``tf.image.adjust_contrast``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.adjust_contrast(tf.constant([[[1.0], [3.0]]]), 2.0)[..., 0].numpy().tolist()
        [[0.0, 4.0]]
    """
    t = _as_t(images)
    if t._aval.dtype.kind != "f":
        raise NotImplementedError("tapejax's adjust_contrast takes float images; convert with tf.cast first.")
    return bind(_contrast_p, t, _as_t(contrast_factor, dtype=t.dtype))


_gray_rgb_p = prim("grayscale_to_rgb", lambda x: jnp.concatenate([x, x, x], axis=-1))


def grayscale_to_rgb(images: Any, name: str | None = None) -> Tensor:
    """Repeat the single channel three times, as ``tf.image.grayscale_to_rgb``.

    Example:
        >>> import tapejax as tf
        >>> tf.image.grayscale_to_rgb(tf.ones((2, 2, 1))).shape
        TensorShape([2, 2, 3])
    """
    t = _as_t(images)
    if t._aval.shape[-1] != 1:
        raise ValueError(f"Dimension -1 must be 1 but is {t._aval.shape[-1]}")
    return bind(_gray_rgb_p, t)


def _convert_impl(x: Any, dtype: Any, saturate: bool) -> Any:
    src, dst = np.dtype(x.dtype), np.dtype(dtype)
    if src.kind == "f" and dst.kind == "f":
        return x.astype(dst)
    if src.kind in "iu" and dst.kind == "f":
        return x.astype(dst) * (1.0 / np.iinfo(src).max)
    if src.kind == "f" and dst.kind in "iu":
        scaled = x * (np.iinfo(dst).max + 0.5)
        if saturate:
            scaled = jnp.clip(scaled, np.iinfo(dst).min, np.iinfo(dst).max)
        return scaled.astype(dst)
    # integer to integer: shift by the difference in bits, as TF
    sb, db = src.itemsize * 8 - (src.kind == "i"), dst.itemsize * 8 - (dst.kind == "i")
    if sb > db:
        return (x >> (sb - db)).astype(dst)
    return x.astype(dst) << (db - sb)


_convert_p = prim("convert_image_dtype", _convert_impl)


def convert_image_dtype(image: Any, dtype: Any, saturate: bool = False, name: str | None = None) -> Tensor:
    """Convert pixel values between types, rescaling (ints span ``[0, MAX]``, floats ``[0, 1)``), as
    ``tf.image.convert_image_dtype``.

    Example:
        >>> import numpy as np, tapejax as tf
        >>> tf.image.convert_image_dtype(np.array([0, 255], np.uint8), tf.float32).numpy().tolist()
        [0.0, 1.0]
    """
    t = _as_t(image)
    d = as_dtype(dtype)
    if not (d.is_floating or d.is_integer):
        raise AttributeError(f"{d.name} is not a valid image dtype: use an integer or floating type.")
    if d._np == t._aval.dtype:
        return t
    return bind(_convert_p, t, dtype=d._np, saturate=bool(saturate))


for _f in (resize, flip_left_right, flip_up_down, transpose, rot90, adjust_brightness, rgb_to_grayscale, central_crop,
           crop_to_bounding_box, pad_to_bounding_box, resize_with_crop_or_pad, per_image_standardization,
           adjust_contrast, grayscale_to_rgb, convert_image_dtype):
    _export(_f, f"image.{_f.__name__}")
