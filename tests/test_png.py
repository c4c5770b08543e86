"""The PNG writer produces valid files (signature, CRCs, pixel data) and draws what it is asked to."""
import struct
import zlib

import numpy as np

from tinytorch.utils.png import Canvas, line_chart, timeline, write_png


def _read_png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        tag, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(tag + body) & 0xFFFFFFFF, tag
        chunks[tag] = chunks.get(tag, b"") + body
        pos += 12 + length
    w, h = struct.unpack(">II", chunks[b"IHDR"][:8])
    raw = zlib.decompress(chunks[b"IDAT"])
    rows = [raw[r * (3 * w + 1) + 1:(r + 1) * (3 * w + 1)] for r in range(h)]
    return np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(h, w, 3)


def test_write_png_round_trips_pixels(tmp_path):
    img = np.random.default_rng(0).integers(0, 255, (7, 5, 3), dtype=np.uint8)
    write_png(str(tmp_path / "a.png"), img)
    assert np.array_equal(_read_png(str(tmp_path / "a.png")), img)


def test_canvas_draws_lines_and_text(tmp_path):
    c = Canvas(40, 20)
    c.line(0, 10, 39, 10, (255, 0, 0))
    c.text(1, 1, "A1", (0, 0, 255), scale=1)
    assert (c.pixels[10, :, 0] == 255).all() and (c.pixels[10, :, 1] == 0).all()
    assert (c.pixels[:8, :12] == (0, 0, 255)).all(axis=-1).any()


def test_charts_write_valid_files(tmp_path):
    line_chart(str(tmp_path / "l.png"), {"loss": ([0, 1, 2], [3.0, 2.0, 1.5])}, title="t", hlines={"base": 2.5})
    timeline(str(tmp_path / "t.png"), {"rank 0": [(0.0, 1.0, "backward"), (0.5, 2.0, "allreduce")]})
    assert _read_png(str(tmp_path / "l.png")).shape == (540, 900, 3)
    assert _read_png(str(tmp_path / "t.png")).shape[1] == 1200
