#!/usr/bin/python3
"""Pillow reference for the image frontend tests (run with Debian's /usr/bin/python3).

  pil_image.py make DIR          writes the test images into DIR and prints a JSON list of them
  pil_image.py resize JOBS.json  for each job {input, mode, height, width, filter, out[, icc]}
                                 writes Pillow's result as a uint8 (1, H, W, 3) .npy and prints
                                 one JSON line {out, scaled: [w, h], left, top}

The reference path is the Hugging Face processors' one: open, apply the EXIF orientation,
convert("RGB") (16-bit grey scaled by its high byte, since Pillow would clip it), resize with
the SPEC 6.2 geometry, crop: an embedded ICC profile is ignored, as convert("RGB") does. With
"icc": true the profile is applied with ImageCms instead (what --colour-manage should match).
"""
import io
import json
import math
import struct
import sys
import zlib

import numpy as np
from PIL import Image, ImageCms, ImageOps

FILTERS = {"bicubic": Image.BICUBIC, "bilinear": Image.BILINEAR, "lanczos": Image.LANCZOS}


# ---------------------------------------------------------------- images

def base_rgb(w, h, seed=1):
    """Photo-like test content: gradients, discs, fine texture and noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 90 * np.sin(x / max(w, 1) * 5.0) + 20 * np.cos(y / 3.0)
    g = 128 + 80 * np.cos((x + y) / max(w + h, 1) * 7.0)
    b = 40 + 180 * y / max(h - 1, 1)
    img = np.stack([r, g, b], -1)
    for _ in range(6):
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
        rad = rng.uniform(0.1, 0.4) * min(w, h) + 1
        m = (x - cx) ** 2 + (y - cy) ** 2 < rad * rad
        img[m] = img[m] * 0.3 + rng.uniform(0, 255, 3) * 0.7
    img += rng.normal(0, 8, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def adversarial_rgb(w, h):
    """The worst case for JPEG shrink-on-load: 1 and 2 px lines, a checkerboard, hard colour edges
    (chroma), thin text-like strokes, over a photo-like background."""
    img = base_rgb(w, h, 7).astype(np.int32)
    y, x = np.mgrid[0:h, 0:w]
    q = w // 4
    img[:, :q][(x[:, :q] % 2) == 0] = 255
    img[:, :q][(x[:, :q] % 2) == 1] = 0
    band = slice(q, 2 * q)
    img[:, band][((y[:, band] // 2) % 2) == 0] = (250, 20, 20)
    img[:, band][((y[:, band] // 2) % 2) == 1] = (20, 20, 250)
    checker = ((x + y) % 2 == 0)[:, 2 * q:3 * q]
    img[:, 2 * q:3 * q][checker] = (0, 255, 0)
    img[:, 2 * q:3 * q][~checker] = (255, 0, 255)
    strokes = ((x % 9 == 0) | (y % 7 == 0))[:, 3 * q:]
    img[:, 3 * q:][strokes] = 0
    return np.clip(img, 0, 255).astype(np.uint8)


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def write_png16(path, arr):
    """A 16-bit PNG (grey or RGB) written directly (Pillow cannot write 16-bit RGB)."""
    h, w = arr.shape[:2]
    colour = 0 if arr.ndim == 2 else 2
    raw = b"".join(b"\0" + arr[i].astype(">u2").tobytes() for i in range(h))
    data = b"\x89PNG\r\n\x1a\n"
    data += png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, colour, 0, 0, 0))
    data += png_chunk(b"IDAT", zlib.compress(raw))
    data += png_chunk(b"IEND", b"")
    open(path, "wb").write(data)


def s15f16(v):
    return struct.pack(">i", int(round(v * 65536)))


ADOBE_RGB = ((0.6097, 0.3111, 0.0195), (0.2053, 0.6257, 0.0609), (0.1492, 0.0632, 0.7446))
DISPLAY_P3 = ((0.5151, 0.2412, -0.0011), (0.2920, 0.6922, 0.0419), (0.1571, 0.0666, 0.7841))


def rgb_matrix_profile(colorants=ADOBE_RGB, name="mlc test wide-gamut RGB"):
    """An ICC v2 RGB display profile: the given primaries (D50-adapted colorants, Adobe RGB (1998)
    by default; DISPLAY_P3 for Display P3's), gamma 2.2."""
    def xyz(x, y, z):
        return b"XYZ \0\0\0\0" + s15f16(x) + s15f16(y) + s15f16(z)

    def curve(gamma):
        return b"curv\0\0\0\0" + struct.pack(">I", 1) + struct.pack(">H", int(gamma * 256))

    def desc(text):
        t = text.encode() + b"\0"
        return (b"desc\0\0\0\0" + struct.pack(">I", len(t)) + t + b"\0" * 8 + b"\0" * 3 +
                b"\0" * 67)

    tags = [
        (b"desc", desc(name)),
        (b"cprt", b"text\0\0\0\0" + b"public domain\0"),
        (b"wtpt", xyz(0.9642, 1.0, 0.8249)),
        (b"rXYZ", xyz(*colorants[0])),
        (b"gXYZ", xyz(*colorants[1])),
        (b"bXYZ", xyz(*colorants[2])),
        (b"rTRC", curve(2.2)),
        (b"gTRC", curve(2.2)),
        (b"bTRC", curve(2.2)),
    ]
    offset = 128 + 4 + 12 * len(tags)
    table, body = b"", b""
    for sig, data in tags:
        while (offset + len(body)) % 4:
            body += b"\0"
        table += sig + struct.pack(">II", offset + len(body), len(data))
        body += data
    size = offset + len(body)
    header = struct.pack(">I", size) + b"lcms" + struct.pack(">I", 0x02100000)
    header += b"mntrRGB XYZ " + struct.pack(">HHHHHH", 2024, 1, 1, 0, 0, 0)
    header += b"acspAPPL" + b"\0" * 4 + b"\0" * 4 + b"\0" * 4 + b"\0" * 8 + b"\0" * 4
    header += s15f16(0.9642) + s15f16(1.0) + s15f16(0.8249) + b"\0" * 4
    header += b"\0" * (128 - len(header))
    return header + struct.pack(">I", len(tags)) + table + body


def exif_with_orientation(o):
    exif = Image.Exif()
    exif[0x0112] = o
    return exif.tobytes()


def make(folder):
    w, h = 97, 61
    rgb = base_rgb(w, h)
    im = Image.fromarray(rgb)
    out = []

    def add(name, **props):
        props["file"] = f"{folder}/{name}"
        props["name"] = name
        out.append(props)

    im.save(f"{folder}/rgb.jpg", quality=92); add("rgb.jpg")
    im.save(f"{folder}/progressive.jpg", quality=90, progressive=True); add("progressive.jpg")
    im.convert("L").save(f"{folder}/grey.jpg", quality=92); add("grey.jpg")
    im.convert("CMYK").save(f"{folder}/cmyk.jpg", quality=95); add("cmyk.jpg")
    for o in range(1, 9):
        im.save(f"{folder}/orient{o}.jpg", quality=92, exif=exif_with_orientation(o))
        add(f"orient{o}.jpg", orientation=o)
    im.save(f"{folder}/rgb.png"); add("rgb.png")
    rgba = np.dstack([rgb, (np.arange(w)[None, :] * 255 // (w - 1)).repeat(h, 0).astype(np.uint8)])
    Image.fromarray(rgba, "RGBA").save(f"{folder}/rgba.png"); add("rgba.png", alpha=True)
    im.convert("L").save(f"{folder}/grey.png"); add("grey.png")
    Image.fromarray(np.dstack([rgb[..., 1], rgba[..., 3]]), "LA").save(f"{folder}/grey_alpha.png")
    add("grey_alpha.png", alpha=True)
    im.quantize(64).save(f"{folder}/palette.png"); add("palette.png")
    im.quantize(64).save(f"{folder}/palette_trns.png", transparency=3)
    add("palette_trns.png", alpha=True)
    write_png16(f"{folder}/rgb16.png", rgb.astype(np.uint16) * 257 + np.uint16(100))
    add("rgb16.png", bits=16)
    write_png16(f"{folder}/grey16.png", rgb[..., 0].astype(np.uint16) * 257 + np.uint16(77))
    add("grey16.png", bits=16)
    im.save(f"{folder}/lossless.webp", lossless=True); add("lossless.webp")
    im.save(f"{folder}/lossy.webp", quality=90); add("lossy.webp")
    frames = [im.quantize(128), Image.fromarray(255 - rgb).quantize(128)]
    frames[0].save(f"{folder}/anim.gif", save_all=True, append_images=frames[1:], duration=50)
    add("anim.gif")
    im.save(f"{folder}/rgb.bmp"); add("rgb.bmp")
    im.save(f"{folder}/rgb.tif"); add("rgb.tif")
    im.convert("CMYK").save(f"{folder}/cmyk.tif"); add("cmyk.tif")
    icc = rgb_matrix_profile()
    im.save(f"{folder}/icc.jpg", quality=95, icc_profile=icc); add("icc.jpg", icc=True)
    im.save(f"{folder}/icc.png", icc_profile=icc); add("icc.png", icc=True)
    p3 = rgb_matrix_profile(DISPLAY_P3, "mlc test Display P3")
    im.save(f"{folder}/p3.jpg", quality=95, subsampling=0, icc_profile=p3); add("p3.jpg", icc=True)
    im.save(f"{folder}/p3.png", icc_profile=p3); add("p3.png", icc=True)
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    im.save(f"{folder}/srgb_tagged.png", icc_profile=srgb); add("srgb_tagged.png", icc=True)
    Image.fromarray(base_rgb(1, 1)).save(f"{folder}/one.png"); add("one.png")
    Image.fromarray(base_rgb(3000, 40, 2)).save(f"{folder}/wide.png"); add("wide.png")
    Image.fromarray(base_rgb(40, 3000, 3)).save(f"{folder}/tall.jpg", quality=90); add("tall.jpg")
    Image.fromarray(base_rgb(13, 9, 4)).save(f"{folder}/small.png"); add("small.png")
    photo = Image.fromarray(base_rgb(1600, 1200, 5))
    photo.save(f"{folder}/photo.jpg", quality=90, subsampling=0); add("photo.jpg", large=True)
    photo.save(f"{folder}/photo420.jpg", quality=90); add("photo420.jpg", large=True)
    photo.save(f"{folder}/photo_o6.jpg", quality=90, subsampling=0, exif=exif_with_orientation(6))
    add("photo_o6.jpg", large=True, orientation=6)
    Image.fromarray(base_rgb(1001, 757, 6)).save(f"{folder}/odd_o3.jpg", quality=90, subsampling=0,
                                                  exif=exif_with_orientation(3))
    add("odd_o3.jpg", large=True, orientation=3)
    lines = Image.fromarray(adversarial_rgb(1600, 1200))
    lines.save(f"{folder}/lines420.jpg", quality=90); add("lines420.jpg", large=True)
    lines.save(f"{folder}/lines444.jpg", quality=95, subsampling=0); add("lines444.jpg", large=True)
    json.dump(out, sys.stdout)


# ---------------------------------------------------------------- reference resize

def to_rgb(im, apply_icc):
    im = ImageOps.exif_transpose(im)
    if im.mode in ("I", "I;16", "I;16B", "I;16L"):
        arr = (np.array(im).astype(np.uint32) >> 8).astype(np.uint8)
        return Image.fromarray(arr, "L").convert("RGB")
    icc = im.info.get("icc_profile")
    if apply_icc and icc:
        src = ImageCms.ImageCmsProfile(io.BytesIO(icc))
        dst = ImageCms.createProfile("sRGB")
        base = im.convert("RGB") if im.mode not in ("RGB", "CMYK", "L") else im
        return ImageCms.profileToProfile(base, src, dst, outputMode="RGB",
                                         renderingIntent=ImageCms.INTENT_RELATIVE_COLORIMETRIC)
    return im.convert("RGB")


def plan(w, h, mode, height, width):
    if mode == "stretch":
        return width, height, 0, 0
    s = max(height / h, width / w)
    sw, sh = max(width, math.floor(w * s + 0.5)), max(height, math.floor(h * s + 0.5))
    return sw, sh, (sw - width) // 2, (sh - height) // 2


def resize(jobs_path):
    for job in json.load(open(jobs_path)):
        im = to_rgb(Image.open(job["input"]), job.get("icc", False))
        sw, sh, left, top = plan(im.width, im.height, job["mode"], job["height"], job["width"])
        out = im.resize((sw, sh), FILTERS[job["filter"]])
        out = out.crop((left, top, left + job["width"], top + job["height"]))
        arr = np.asarray(out, dtype=np.uint8)[None]
        np.save(job["out"], arr)
        print(json.dumps({"out": job["out"], "scaled": [sw, sh], "left": left, "top": top}))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "resize":
        resize(sys.argv[2])
    else:
        sys.exit("usage: pil_image.py make DIR | resize JOBS.json")
