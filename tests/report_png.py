"""What a PNG screenshot shows, for test_report's browser test, with the
standard library only (zlib and struct, no PIL).

    python3 tests/report_png.py SHOT.png [RRGGBB ...]

prints `size W H`, `colours N` (distinct pixel values), `most P` (the share
of pixels that have the most common value: the background) and, for each
RRGGBB asked for, `RRGGBB COUNT` (the pixels of exactly that colour).
Reads 8-bit greyscale, RGB and RGBA images without interlacing, which is
what Chromium writes; exits 1 with a message on anything else.
"""
import struct
import sys
import zlib
from collections import Counter

CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel


def chunks(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos = 8
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        yield kind, data[pos + 8:pos + 8 + length]
        pos += 12 + length


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def unfilter(kind, line, prev, bpp):
    """One scanline without its filter (PNG spec, section 9)."""
    out = bytearray(line)
    if kind == 0:
        return out
    if kind == 2:
        return bytearray((x + y) & 255 for x, y in zip(line, prev))
    for i in range(len(out)):
        a = out[i - bpp] if i >= bpp else 0
        if kind == 1:
            out[i] = (out[i] + a) & 255
        elif kind == 3:
            out[i] = (out[i] + ((a + prev[i]) >> 1)) & 255
        elif kind == 4:
            c = prev[i - bpp] if i >= bpp else 0
            out[i] = (out[i] + paeth(a, prev[i], c)) & 255
        else:
            raise ValueError(f"unknown filter {kind}")
    return out


def pixels(path):
    """(width, height, Counter of pixel values as bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    header, idat = None, []
    for kind, body in chunks(data):
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    if header is None:
        raise ValueError("no IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in CHANNELS or interlace != 0:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}")
    bpp = CHANNELS[colour]
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    counts, prev = Counter(), bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        row = unfilter(raw[start], raw[start + 1:start + 1 + stride], prev, bpp)
        counts.update(bytes(row[i:i + bpp]) for i in range(0, stride, bpp))
        prev = row
    return width, height, counts


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        width, height, counts = pixels(argv[1])
    except (OSError, ValueError, zlib.error, struct.error) as e:
        print(f"{argv[1]}: {e}", file=sys.stderr)
        return 1
    print(f"size {width} {height}")
    print(f"colours {len(counts)}")
    print(f"most {counts.most_common(1)[0][1] / (width * height):.4f}")
    for hex_colour in argv[2:]:
        rgb = bytes.fromhex(hex_colour)
        n = sum(c for value, c in counts.items() if value[:3] == rgb and value[3:] in (b"", b"\xff"))
        print(f"{hex_colour} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
