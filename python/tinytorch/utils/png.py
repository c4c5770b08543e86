"""Small PNG charts (line plots and timelines) drawn with NumPy, so examples and benchmarks can show
a loss curve or a backward/all-reduce timeline without a plotting library."""
from __future__ import annotations

import os
import struct
import tempfile
import zlib
from typing import Dict, List, Sequence, Tuple

import numpy as np

# 5x7 bitmap glyphs (rows top to bottom, '1' = ink) for the characters charts need.
_GLYPHS = {
    "0": "01110 10001 10011 10101 11001 10001 01110", "1": "00100 01100 00100 00100 00100 00100 01110",
    "2": "01110 10001 00001 00010 00100 01000 11111", "3": "11110 00001 00001 01110 00001 00001 11110",
    "4": "00010 00110 01010 10010 11111 00010 00010", "5": "11111 10000 11110 00001 00001 10001 01110",
    "6": "00110 01000 10000 11110 10001 10001 01110", "7": "11111 00001 00010 00100 01000 01000 01000",
    "8": "01110 10001 10001 01110 10001 10001 01110", "9": "01110 10001 10001 01111 00001 00010 01100",
    "A": "01110 10001 10001 11111 10001 10001 10001", "B": "11110 10001 10001 11110 10001 10001 11110",
    "C": "01110 10001 10000 10000 10000 10001 01110", "D": "11100 10010 10001 10001 10001 10010 11100",
    "E": "11111 10000 10000 11110 10000 10000 11111", "F": "11111 10000 10000 11110 10000 10000 10000",
    "G": "01110 10001 10000 10111 10001 10001 01111", "H": "10001 10001 10001 11111 10001 10001 10001",
    "I": "01110 00100 00100 00100 00100 00100 01110", "J": "00111 00010 00010 00010 00010 10010 01100",
    "K": "10001 10010 10100 11000 10100 10010 10001", "L": "10000 10000 10000 10000 10000 10000 11111",
    "M": "10001 11011 10101 10101 10001 10001 10001", "N": "10001 10001 11001 10101 10011 10001 10001",
    "O": "01110 10001 10001 10001 10001 10001 01110", "P": "11110 10001 10001 11110 10000 10000 10000",
    "Q": "01110 10001 10001 10001 10101 10010 01101", "R": "11110 10001 10001 11110 10100 10010 10001",
    "S": "01111 10000 10000 01110 00001 00001 11110", "T": "11111 00100 00100 00100 00100 00100 00100",
    "U": "10001 10001 10001 10001 10001 10001 01110", "V": "10001 10001 10001 10001 10001 01010 00100",
    "W": "10001 10001 10001 10101 10101 10101 01010", "X": "10001 10001 01010 00100 01010 10001 10001",
    "Y": "10001 10001 01010 00100 00100 00100 00100", "Z": "11111 00001 00010 00100 01000 10000 11111",
    ".": "00000 00000 00000 00000 00000 01100 01100", ",": "00000 00000 00000 00000 01100 00100 01000",
    "-": "00000 00000 00000 11111 00000 00000 00000", "_": "00000 00000 00000 00000 00000 00000 11111",
    ":": "00000 01100 01100 00000 01100 01100 00000", "/": "00001 00010 00010 00100 01000 01000 10000",
    "(": "00010 00100 01000 01000 01000 00100 00010", ")": "01000 00100 00010 00010 00010 00100 01000",
    "=": "00000 00000 11111 00000 11111 00000 00000", "%": "11001 11010 00010 00100 01000 01011 10011",
    "+": "00000 00100 00100 11111 00100 00100 00000", "x": "00000 00000 10001 01010 00100 01010 10001",
    " ": "00000 00000 00000 00000 00000 00000 00000",
}
_BITMAPS = {c: np.array([[ch == "1" for ch in row] for row in g.split()], dtype=bool) for c, g in _GLYPHS.items()}

PALETTE = [(31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189), (140, 86, 75),
           (227, 119, 194), (127, 127, 127)]


class Canvas:
    """An RGB image with the few drawing primitives charts need."""

    def __init__(self, width: int, height: int) -> None:
        self.pixels = np.full((height, width, 3), 255, dtype=np.uint8)

    @property
    def width(self) -> int:
        return self.pixels.shape[1]

    @property
    def height(self) -> int:
        return self.pixels.shape[0]

    def rect(self, x0: float, y0: float, x1: float, y1: float, color) -> None:
        xa, xb = sorted((int(round(x0)), int(round(x1))))
        ya, yb = sorted((int(round(y0)), int(round(y1))))
        xa, ya = max(xa, 0), max(ya, 0)
        xb, yb = min(max(xb, xa + 1), self.width), min(max(yb, ya + 1), self.height)
        self.pixels[ya:yb, xa:xb] = color

    def line(self, x0: float, y0: float, x1: float, y1: float, color, thickness: int = 1) -> None:
        n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
        xs = np.linspace(x0, x1, n).round().astype(int)
        ys = np.linspace(y0, y1, n).round().astype(int)
        for dx in range(thickness):
            for dy in range(thickness):
                xx, yy = xs + dx - thickness // 2, ys + dy - thickness // 2
                ok = (xx >= 0) & (xx < self.width) & (yy >= 0) & (yy < self.height)
                self.pixels[yy[ok], xx[ok]] = color

    def text(self, x: float, y: float, s: str, color=(0, 0, 0), scale: int = 2) -> None:
        """Draw s with its top-left corner at (x, y); unknown characters print as blanks."""
        cx = int(x)
        for ch in s:
            glyph = _BITMAPS.get(ch.upper() if ch not in _BITMAPS else ch, _BITMAPS[" "])
            big = np.kron(glyph, np.ones((scale, scale), dtype=bool))
            h, w = big.shape
            y0, x0 = int(y), cx
            region = self.pixels[max(y0, 0):y0 + h, max(x0, 0):x0 + w]
            mask = big[:region.shape[0], :region.shape[1]]
            region[mask] = color
            cx += (5 + 1) * scale

    @staticmethod
    def text_width(s: str, scale: int = 2) -> int:
        return len(s) * 6 * scale

    def save(self, path: str) -> None:
        write_png(path, self.pixels)


def write_png(path: str, rgb: np.ndarray) -> None:
    """Write an HxWx3 uint8 array as a PNG, atomically (temporary file, then rename)."""
    height, width, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[row].tobytes() for row in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".png.tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(png)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _ticks(lo: float, hi: float, n: int = 5) -> List[float]:
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    mag = 10 ** np.floor(np.log10(raw))
    step = min((m * mag for m in (1, 2, 5, 10) if m * mag >= raw), default=raw)
    start = np.ceil(lo / step) * step
    return [float(v) for v in np.arange(start, hi + step * 1e-9, step)]


def _label(v: float) -> str:
    if v == 0:
        return "0"
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    if abs(v) >= 1e6 or abs(v) < 1e-2:
        return f"{v:.0e}"
    return f"{v:.3g}"


def line_chart(path: str, series: Dict[str, Tuple[Sequence[float], Sequence[float]]], title: str = "",
               xlabel: str = "", ylabel: str = "", width: int = 900, height: int = 540,
               hlines: Dict[str, float] | None = None, log_x: bool = False) -> None:
    """Plot named (xs, ys) series with axes, ticks and a legend; optional labelled horizontal lines."""
    c = Canvas(width, height)
    left, right, top, bottom = 90, 30, 50, 60
    xs_all = np.concatenate([np.asarray(s[0], float) for s in series.values()]) if series else np.zeros(1)
    ys_all = np.concatenate([np.asarray(s[1], float) for s in series.values()]) if series else np.zeros(1)
    if hlines:
        ys_all = np.concatenate([ys_all, np.asarray(list(hlines.values()), float)])
    fx = np.log10 if log_x else (lambda v: np.asarray(v, float))
    x0, x1 = float(fx(xs_all).min()), float(fx(xs_all).max())
    y0, y1 = float(np.nanmin(ys_all)), float(np.nanmax(ys_all))
    if x1 == x0:
        x1 = x0 + 1
    pad = (y1 - y0) * 0.05 or 1.0
    y0, y1 = y0 - pad, y1 + pad

    def px(v):
        return left + (fx(v) - x0) / (x1 - x0) * (width - left - right)

    def py(v):
        return height - bottom - (np.asarray(v, float) - y0) / (y1 - y0) * (height - top - bottom)

    c.line(left, top, left, height - bottom, (0, 0, 0))
    c.line(left, height - bottom, width - right, height - bottom, (0, 0, 0))
    for t in _ticks(y0, y1):
        y = float(py(t))
        c.line(left - 5, y, width - right, y, (225, 225, 225))
        c.text(left - 10 - Canvas.text_width(_label(t)), y - 7, _label(t))
    xticks = [10 ** t for t in _ticks(x0, x1)] if log_x else _ticks(x0, x1)
    for t in xticks:
        x = float(px(t))
        c.line(x, height - bottom, x, height - bottom + 5, (0, 0, 0))
        c.text(x - Canvas.text_width(_label(t)) / 2, height - bottom + 10, _label(t))
    for i, (name, value) in enumerate((hlines or {}).items()):
        y = float(py(value))
        c.line(left, y, width - right, y, (160, 160, 160))
        c.text(left + 6, y - 18, name, (120, 120, 120))  # at the left: the legend sits top right
    for i, (name, (xs, ys)) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        pts = list(zip(px(np.asarray(xs, float)), py(np.asarray(ys, float))))
        for (xa, ya), (xb, yb) in zip(pts[:-1], pts[1:]):
            c.line(xa, ya, xb, yb, color, thickness=2)
        if len(pts) == 1:
            c.rect(pts[0][0] - 3, pts[0][1] - 3, pts[0][0] + 3, pts[0][1] + 3, color)
        c.rect(width - right - 220, top + 10 + 22 * i, width - right - 200, top + 22 + 22 * i, color)
        c.text(width - right - 192, top + 9 + 22 * i, name)
    c.text((width - Canvas.text_width(title, 3)) / 2, 12, title, scale=3)
    c.text((width - Canvas.text_width(xlabel)) / 2, height - 25, xlabel)
    c.text(8, top - 30, ylabel)
    c.save(path)


def timeline(path: str, tracks: Dict[str, List[Tuple[float, float, str]]], title: str = "",
             unit: str = "ms", width: int = 1200, row_height: int = 36) -> None:
    """Draw spans (start, end, label) on named horizontal tracks sharing one time axis."""
    left = 20 + max((Canvas.text_width(name) for name in tracks), default=100)
    right, top = 30, 50
    height = top + row_height * len(tracks) + 60
    c = Canvas(width, height)
    spans = [s for track in tracks.values() for s in track]
    t0 = min((s[0] for s in spans), default=0.0)
    t1 = max((s[1] for s in spans), default=1.0)
    if t1 <= t0:
        t1 = t0 + 1

    def px(t):
        return left + (t - t0) / (t1 - t0) * (width - left - right)

    labels: Dict[str, Tuple[int, int, int]] = {}
    for row, (name, items) in enumerate(tracks.items()):
        y = top + row * row_height
        c.text(8, y + row_height / 2 - 7, name)
        c.line(left, y + row_height - 2, width - right, y + row_height - 2, (230, 230, 230))
        for start, end, label in items:
            color = labels.setdefault(label, PALETTE[len(labels) % len(PALETTE)])
            c.rect(px(start), y + 4, max(px(end), px(start) + 1), y + row_height - 6, color)
    axis_y = top + row_height * len(tracks) + 5
    c.line(left, axis_y, width - right, axis_y, (0, 0, 0))
    for t in _ticks(0.0, t1 - t0):
        x = px(t0 + t)
        c.line(x, axis_y, x, axis_y + 5, (0, 0, 0))
        c.text(x - Canvas.text_width(_label(t)) / 2, axis_y + 10, _label(t))
    c.text(width - right - Canvas.text_width(unit), axis_y + 30, unit)
    x = 8
    for label, color in labels.items():
        c.rect(x, 10, x + 16, 24, color)
        c.text(x + 22, 10, label)
        x += 22 + Canvas.text_width(label) + 24
    c.text(width - Canvas.text_width(title, 2) - right, 32, title)
    c.save(path)
