import numpy as np
import numpy.typing as npt

def render_area(
    display: npt.NDArray[np.uint8],
    flash: bool,
    channels: int,
    lut: npt.NDArray[np.uint8],
    x: int,
    y: int,
    w: int,
    h: int,
    out: npt.NDArray[np.uint8],
    out_h: int,
    out_w: int,
) -> None: ...
