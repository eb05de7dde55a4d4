from collections.abc import Buffer

def render_area(
    display: Buffer,
    flash: bool,
    channels: int,
    lut: Buffer,
    x: int,
    y: int,
    w: int,
    h: int,
    out: Buffer,
    out_h: int,
    out_w: int,
) -> None: ...
