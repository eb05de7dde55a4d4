/*
 * OakEmu-RL: the screen-observation hot path in C.
 *
 * render_area() turns Spectrum display memory straight into an area-resampled
 * observation: the play area's pixels go through a colour look-up table
 * (grayscale or RGB) and are averaged into out_h x out_w pixels in one pass,
 * with no temporaries. oakemu_rl.envs.resample holds the numpy reference, which
 * is also the fallback when this module is not built; the two agree exactly.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define SCREEN_W 256
#define SCREEN_H 192
#define BITMAP_SIZE 6144

/* EXPAND[b]: byte b's 8 bits as 8 bytes of 0x00/0xFF, most significant bit first. */
static uint64_t EXPAND[256];

static void init_expand(void) {
    for (int b = 0; b < 256; ++b) {
        uint64_t v = 0;
        for (int i = 0; i < 8; ++i)
            if (b & (0x80 >> i)) v |= (uint64_t)0xFF << (8 * i); /* little-endian byte i */
        EXPAND[b] = v;
    }
}

/*
 * Area resampling by pixel centres: source pixel p (of n_in) belongs to output
 * bin floor((p + 0.5) * n_out / n_in); an output pixel is the rounded mean of
 * its bin. Sums are exact integers, so the numpy fallback matches bit for bit.
 */
static void make_bins(int *bin, int *start, int *count, int n_in, int n_out) {
    for (int i = 0; i < n_out; ++i) count[i] = 0;
    for (int p = 0; p < n_in; ++p) {
        bin[p] = (int)(((2 * (long)p + 1) * n_out) / (2 * (long)n_in));
        if (count[bin[p]]++ == 0) start[bin[p]] = p;
    }
}

static PyObject *render_area(PyObject *self, PyObject *args) {
    Py_buffer display, lut, out;
    int flash, channels, x, y, w, h, out_h, out_w;
    if (!PyArg_ParseTuple(args, "y*piy*iiiiw*ii", &display, &flash, &channels, &lut, &x, &y,
                          &w, &h, &out, &out_h, &out_w))
        return NULL;
    PyObject *result = NULL;
    int col_bin[SCREEN_W], col_start[SCREEN_W], col_count[SCREEN_W];
    int row_bin[SCREEN_H], row_start[SCREEN_H], row_count[SCREEN_H];
    uint64_t line64[SCREEN_W / 8];
    uint8_t *line = (uint8_t *)line64;
    uint32_t linesum[SCREEN_W];

    if (display.len < BITMAP_SIZE + 768 || (channels != 1 && channels != 3) ||
        lut.len < 16 * channels || x < 0 || y < 0 || w < 1 || h < 1 || x + w > SCREEN_W ||
        y + h > SCREEN_H || out_w < 1 || out_h < 1 || out_w > w || out_h > h ||
        out.len < (Py_ssize_t)out_h * out_w * channels) {
        PyErr_SetString(PyExc_ValueError, "render_area: bad geometry or buffer sizes");
        goto done;
    }
    make_bins(col_bin, col_start, col_count, w, out_w);
    make_bins(row_bin, row_start, row_count, h, out_h);
    const uint8_t *mem = display.buf;
    const uint8_t *colours = lut.buf;
    uint8_t *dst = out.buf;

    for (int k = 0; k < channels; ++k) {
        memset(linesum, 0, sizeof linesum);
        for (int r = 0; r < h; ++r) {
            const int sy = y + r;
            const uint8_t *bitmap =
                mem + (((sy & 0xC0) << 5) | ((sy & 0x07) << 8) | ((sy & 0x38) << 2));
            const uint8_t *attrs = mem + BITMAP_SIZE + 32 * (sy >> 3);
            /* Render the whole row, 8 pixels a word: paper, with ink where bits are set. */
            for (int cell = 0; cell < 32; ++cell) {
                const unsigned a = attrs[cell];
                const unsigned bright = (a & 0x40) >> 3;
                const uint64_t ink = colours[channels * ((a & 7) | bright) + k] * 0x0101010101010101ULL;
                const uint64_t paper =
                    colours[channels * (((a >> 3) & 7) | bright) + k] * 0x0101010101010101ULL;
                unsigned bits = bitmap[cell];
                if (flash && (a & 0x80)) bits = ~bits & 0xFF;
                line64[cell] = paper ^ ((ink ^ paper) & EXPAND[bits]);
            }
            for (int i = 0; i < w; ++i) linesum[i] += line[x + i];
            /* A finished output row: sum each column bin, divide rounding half up, store. */
            if (r == h - 1 || row_bin[r + 1] != row_bin[r]) {
                const int o = row_bin[r];
                uint8_t *row_out = dst + (size_t)o * out_w * channels + k;
                for (int j = 0; j < out_w; ++j) {
                    uint32_t sum = 0;
                    for (int i = col_start[j]; i < col_start[j] + col_count[j]; ++i) sum += linesum[i];
                    const uint32_t n = (uint32_t)row_count[o] * (uint32_t)col_count[j];
                    row_out[channels * j] = (uint8_t)((2 * sum + n) / (2 * n));
                }
                memset(linesum, 0, sizeof linesum);
            }
        }
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyBuffer_Release(&display);
    PyBuffer_Release(&lut);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"render_area", render_area, METH_VARARGS,
     "render_area(display, flash, channels, lut, x, y, w, h, out, out_h, out_w): "
     "box-resample the play area of Spectrum display memory into `out` (HWC uint8)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "oakemu_rl._native.screen_kernel",
    "The screen-observation hot path of OakEmu-RL.", -1, methods,
};

PyMODINIT_FUNC PyInit_screen_kernel(void) {
    init_expand();
    return PyModule_Create(&module);
}
