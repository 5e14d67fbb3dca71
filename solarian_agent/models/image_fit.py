"""Images fitted to what one provider accepts, and encoded for its wire format.

Each provider has :class:`ImageLimits`: the longest side (``max_image_side``), a pixel cap,
a count per request and a byte size per image.  **The harness prepares every image at
``min(config image_max_side, provider.max_image_side)`` (and within
``provider.max_image_pixels``) so that the image the model sees is exactly the one whose
:class:`~solarian_agent.perception.images.Scaling` it recorded, and points read off it map
back to capture pixels exactly.**  The resize here is only a safety net for callers that did
not: it logs a warning, because points read off a resized image no longer map through the
caller's scaling.  More images than ``max_images`` are refused with
``ModelError("bad_request")`` before any request is sent, never silently dropped.  The
limits are on every provider as ``max_image_side``, ``max_image_pixels`` and
``max_images``.  An ``ImagePart.label`` is sent as a text part right before its image.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
from dataclasses import dataclass

from ..core.model_api import ImagePart, Message, ModelError, ModelRequest, TextPart

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ImageLimits:
    """What one provider accepts per request without resizing images itself."""

    max_side: int
    max_pixels: int
    max_images: int
    max_bytes: int


def data_url(img: ImagePart) -> str:
    return f"data:{img.media_type};base64,{base64.b64encode(img.data).decode('ascii')}"


def b64(img: ImagePart) -> str:
    return base64.b64encode(img.data).decode("ascii")


def fit_image(img: ImagePart, limits: ImageLimits, index: int) -> ImagePart:
    """``img`` within ``limits`` (resized only when it is not; see the module docstring)."""
    w, h = img.width, img.height
    if w <= 0 or h <= 0:
        w, h = _decoded_size(img, index)
    scale = 1.0
    if max(w, h) > limits.max_side:
        scale = limits.max_side / max(w, h)
    if w * h * scale * scale > limits.max_pixels:
        scale = min(scale, (limits.max_pixels / float(w * h)) ** 0.5)
    out = img
    if scale < 1.0:
        out = _resize(img, max(1, int(w * scale)), max(1, int(h * scale)), index)
        log.warning("image %d (%s, %dx%d) exceeds this provider's limits; resized to %dx%d. "
                    "Prepare images at the provider's max_image_side so points map exactly.",
                    index, img.observation_id or "no observation id", w, h, out.width,
                    out.height)
    if len(out.data) > limits.max_bytes:
        raise ModelError("bad_request", (
            f"image {index} ({out.observation_id or 'no observation id'}) is "
            f"{len(out.data)} bytes encoded; this provider takes at most {limits.max_bytes}"))
    return out


def _decoded_size(img: ImagePart, index: int) -> tuple[int, int]:
    import cv2
    import numpy as np

    arr = cv2.imdecode(np.frombuffer(img.data, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    if arr is None:
        raise ModelError("bad_request", f"image {index} ({img.media_type}) could not be decoded")
    return int(arr.shape[1]), int(arr.shape[0])


def _resize(img: ImagePart, nw: int, nh: int, index: int) -> ImagePart:
    import cv2
    import numpy as np

    arr = cv2.imdecode(np.frombuffer(img.data, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    if arr is None:
        raise ModelError("bad_request", f"image {index} ({img.media_type}) could not be decoded")
    arr = cv2.resize(arr, (nw, nh), interpolation=cv2.INTER_AREA)
    if img.media_type == "image/png":
        ok, buf = cv2.imencode(".png", arr)
        mt = "image/png"
    else:
        ok, buf = cv2.imencode(".jpg", arr, [cv2.IMWRITE_JPEG_QUALITY, 90])
        mt = "image/jpeg"
    if not ok:
        raise ModelError("bad_request", f"image {index} could not be re-encoded after resizing")
    return dataclasses.replace(img, data=buf.tobytes(), media_type=mt, width=nw, height=nh)


def fit_request_images(request: ModelRequest, limits: ImageLimits, provider: str
                       ) -> ModelRequest:
    """The request with every image within ``limits``; too many images → bad_request."""
    count = sum(isinstance(p, ImagePart) for m in request.messages for p in m.content)
    if count > limits.max_images:
        raise ModelError("bad_request", (
            f"the request carries {count} images; {provider} takes at most "
            f"{limits.max_images} per request (keep fewer images in context)"))
    if count == 0:
        return request
    index = 0
    messages: list[Message] = []
    for m in request.messages:
        parts: list[TextPart | ImagePart] = []
        for p in m.content:
            if isinstance(p, ImagePart):
                index += 1
                parts.append(fit_image(p, limits, index))
            else:
                parts.append(p)
        messages.append(dataclasses.replace(m, content=tuple(parts)))
    return dataclasses.replace(request, messages=tuple(messages))

