"""PDFs written byte by byte, for drawing tricks that PDF libraries do not offer: annotations
with their own appearance, Form XObjects inside each other, optional-content layers, odd text
render modes, tiny or clipped text. One page, Helvetica (a standard font: nothing embedded)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

VISIBLE_LINE = "The parties agree to the terms set out in this order."
HIDDEN_LINE = "Secret payment of 4,250,000 dollars to the claimant."


def text_op(text: str, x: float, y: float, size: float = 12) -> str:
    """A content-stream text object drawing `text` (plain ASCII) at (x, y)."""
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return f"BT /F1 {size} Tf {x} {y} Td ({escaped}) Tj ET"


def page_with(
    content: str,
    *,
    xobjects: Sequence[tuple[str, str]] = (),
    annots: Sequence[str] = (),
    images: Sequence[tuple[str, int, int, bytes]] = (),
    ocg_off: bool = False,
    media_box: tuple[float, float, float, float] = (0, 0, 612, 792),
    extra_pages: Sequence[tuple[str, tuple[float, float, float, float]]] = (),
) -> bytes:
    """A PDF whose first page draws `content`, then pages `extra_pages` (content, media box).

    `xobjects`: (name, content) Form XObjects, each with the page's resources, so one can draw
    the next (/Fx0 ... /Fx4). `annots`: appearance-stream contents of Square annotations over
    the whole page. `images`: (name, width, height, grey bytes) images. `ocg_off`: an
    optional-content group /OC0, off by default, in the page's /Properties.
    """
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    def stream(dictionary: str, data: bytes) -> bytes:
        return f"<< {dictionary} /Length {len(data)} >>\nstream\n".encode() + data + b"\nendstream"

    catalog = add(b"")
    pages = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    ocg = add(b"<< /Type /OCG /Name (Hidden) >>") if ocg_off else None
    resources_ref = add(b"")
    xobject_refs = {}
    for name, width, height, data in images:
        xobject_refs[name] = add(
            stream(
                f"/Type /XObject /Subtype /Image /Width {width} /Height {height} "
                "/ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode",
                zlib.compress(data),
            )
        )
    for name, form in xobjects:
        xobject_refs[name] = add(
            stream(
                f"/Type /XObject /Subtype /Form /BBox [-10000 -10000 10000 10000] "
                f"/Resources {resources_ref} 0 R",
                form.encode(),
            )
        )
    x_entries = " ".join(f"/{name} {ref} 0 R" for name, ref in xobject_refs.items())
    properties = f"/Properties << /OC0 {ocg} 0 R >>" if ocg else ""
    objects[resources_ref - 1] = (
        f"<< /Font << /F1 {font} 0 R >> /XObject << {x_entries} >> {properties} >>".encode()
    )
    annot_refs = []
    for appearance in annots:
        ap = add(
            stream(
                f"/Type /XObject /Subtype /Form /BBox [0 0 {media_box[2]} {media_box[3]}]",
                appearance.encode(),
            )
        )
        annot_refs.append(
            add(
                f"<< /Type /Annot /Subtype /Square /Rect [0 0 {media_box[2]} {media_box[3]}] "
                f"/F 4 /AP << /N {ap} 0 R >> >>".encode()
            )
        )
    page_refs = []
    for page_content, box in [(content, media_box), *extra_pages]:
        contents = add(stream("", page_content.encode()))
        annots_entry = f"/Annots [{' '.join(f'{r} 0 R' for r in annot_refs)}]"
        page_refs.append(
            add(
                f"<< /Type /Page /Parent {pages} 0 R /MediaBox [{' '.join(map(str, box))}] "
                f"/Resources {resources_ref} 0 R /Contents {contents} 0 R "
                f"{annots_entry if not page_refs else ''} >>".encode()
            )
        )
    kids = " ".join(f"{ref} 0 R" for ref in page_refs)
    objects[pages - 1] = f"<< /Type /Pages /Kids [{kids}] /Count {len(page_refs)} >>".encode()
    oc_properties = (
        f"/OCProperties << /OCGs [{ocg} 0 R] /D << /OFF [{ocg} 0 R] >> >>" if ocg else ""
    )
    objects[catalog - 1] = f"<< /Type /Catalog /Pages {pages} 0 R {oc_properties} >>".encode()
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root {catalog} 0 R >>\n".encode()
    out += f"startxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def write(directory: Path, name: str, data: bytes) -> Path:
    path = directory / name
    path.write_bytes(data)
    return path
