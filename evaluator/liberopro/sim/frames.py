"""Camera images made only when something reads them (issue 12: "Render only the frames something
reads"). Imports no simulator: the shifts' observation layers use it on fakes too.

A :class:`liberopro.sim.scene.RawFrame`'s ``images`` is a mapping camera name -> (H, W, 3) uint8 image
(as rendered: upside down). With on-demand rendering (:class:`liberopro.sim.scene.LiberoScene`,
``on_demand=True``) it is a :class:`LazyImages`: a camera is rendered the first time its image is
read, and image shifts (S14, S16, D13) transform an image the first time the transformed one is
read. Iterating the keys, ``len`` and ``in`` make nothing; reading a value (``[]``, ``values()``,
``items()``, ``dict(...)``) makes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

import numpy as np


class LazyImages(Mapping[str, np.ndarray]):
    """camera name -> image, each made by ``make(camera)`` at its first read, then kept (the same
    array object at every later read).

    Args:
        cameras: the camera names, in order (the mapping's keys).
        make: camera name -> (H, W, 3) uint8 image. It may raise (e.g. ``RuntimeError`` from the
            scene when the frame is read after the scene moved on); nothing is kept then.
    """

    def __init__(self, cameras: Iterable[str], make: Callable[[str], np.ndarray]) -> None:
        self._cameras = tuple(cameras)
        self._make = make
        self._made: dict[str, np.ndarray] = {}

    def __getitem__(self, camera: str) -> np.ndarray:
        if camera not in self._made:
            if camera not in self._cameras:
                raise KeyError(camera)
            self._made[camera] = self._make(camera)
        return self._made[camera]

    def __iter__(self) -> Iterator[str]:
        return iter(self._cameras)

    def __len__(self) -> int:
        return len(self._cameras)

    def __contains__(self, camera: object) -> bool:
        return camera in self._cameras

    def made(self) -> tuple[str, ...]:
        """The cameras whose image was made so far (tests, diagnostics)."""
        return tuple(c for c in self._cameras if c in self._made)

    def __repr__(self) -> str:
        return f"LazyImages({list(self._cameras)}, made={list(self.made())})"


def map_images(images: Mapping[str, np.ndarray], fn: Callable[[str, np.ndarray], np.ndarray]) -> LazyImages:
    """``images`` with ``fn(camera, image)`` applied to each image at its first read (the input
    image is read then too, not before): the form of every per-image observation shift, so that
    it acts only on the images a consumer reads."""
    return LazyImages(images, lambda camera: fn(camera, images[camera]))


__all__ = ["LazyImages", "map_images"]
