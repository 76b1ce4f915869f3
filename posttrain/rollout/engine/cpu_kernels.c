/* The native engine's CPU kernels, AVX-512, float32: products y = x W^T (+ bias) (+ residual)
 * (`gemm`), the gate|up product with SwiGLU's SiLU and product in its epilogue (`gemm_swiglu`), and the
 * sampler's float64 block sums (`block_sums`).
 *
 * The weight is packed once into panels of 16 output columns, k-major: element (n, k) of W [N, K]
 * lies at ((n / 16) * K + k) * 16 + n % 16, so one 64-byte load holds a row of 16 columns at one k.
 * Each call walks groups of PANELS panels (one OpenMP thread per share of the groups) and, per group,
 * blocks of at most ROWS rows of x: ROWS x PANELS accumulators stay in registers through the whole
 * k loop (one weight load per panel and k, one broadcast of x per row and k, PANELS fused multiply-adds
 * per broadcast), so every sum over k is a plain sequence of fused multiply-adds in k order. While the
 * first row block of a group runs, the next group's panels are prefetched into L2: the weight streams
 * from memory once per call, which is what bounds a decode step's products (a few dozen rows).
 * Built and loaded by cpu_kernels.py; nothing here allocates.
 */
#include <immintrin.h>
#include <omp.h>

#define PANELS 3
#define ROWS 8

/* exp(x) for float32 lanes: x = n ln2 + r with |r| <= ln2 / 2, exp(r) by its degree-7 Taylor
 * polynomial (truncation below 6e-9 relative), scaled by 2^n; within 1 ulp of the correctly rounded
 * value on every 64th float of [-87, 88). */
static inline __m512 exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.72f)), _mm512_set1_ps(-103.9f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x); /* ln2, high part */
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-06f), r);    /* ln2, low part */
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* One block of `rows` rows against `panels` panels, summed over k. Epilogue: `swiglu` 0 adds the bias
 * and residual and stores the panels at columns n0..; 1 takes panel 0 as gate and panel 1 as up and
 * stores silu(gate) * up, silu(g) = g / (1 + exp(-g)), at columns n0 / 2.. of y [M, N / 2]. */
static inline __attribute__((always_inline)) void block(const int rows, const int panels, const int swiglu,
                                                        const float *x, long K, const float *w, float *y,
                                                        long N, long n0, const float *bias, const float *res,
                                                        const float *next) {
    __m512 acc[ROWS][PANELS];
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < panels; j++) acc[r][j] = _mm512_setzero_ps();
    for (long k = 0; k < K; k++) {
        __m512 wv[PANELS];
        for (int j = 0; j < panels; j++) wv[j] = _mm512_loadu_ps(w + (j * K + k) * 16);
        if (next)
            for (int j = 0; j < panels; j++) _mm_prefetch((const char *)(next + (j * K + k) * 16), _MM_HINT_T1);
        for (int r = 0; r < rows; r++) {
            __m512 s = _mm512_set1_ps(x[r * K + k]);
            for (int j = 0; j < panels; j++) acc[r][j] = _mm512_fmadd_ps(s, wv[j], acc[r][j]);
        }
    }
    if (swiglu) {
        const __m512 one = _mm512_set1_ps(1.0f);
        for (int r = 0; r < rows; r++) {
            const __m512 gate = acc[r][0];
            const __m512 silu = _mm512_div_ps(gate, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), gate))));
            _mm512_storeu_ps(y + r * (N / 2) + n0 / 2, _mm512_mul_ps(silu, acc[r][1]));
        }
        return;
    }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < panels; j++) {
            __m512 v = acc[r][j];
            if (bias) v = _mm512_add_ps(v, _mm512_loadu_ps(bias + n0 + 16 * j));
            if (res) v = _mm512_add_ps(v, _mm512_loadu_ps(res + r * N + n0 + 16 * j));
            _mm512_storeu_ps(y + r * N + n0 + 16 * j, v);
        }
}

typedef void (*block_fn)(const float *, long, const float *, float *, long, long, const float *,
                         const float *, const float *);
#define BLOCK(R, P, S)                                                                                   \
    static void block_##R##_##P##_##S(const float *x, long K, const float *w, float *y, long N, long n0, \
                                      const float *bias, const float *res, const float *next) {          \
        block(R, P, S, x, K, w, y, N, n0, bias, res, next);                                              \
    }
#define BLOCKS(P, S) BLOCK(1, P, S) BLOCK(2, P, S) BLOCK(3, P, S) BLOCK(4, P, S) BLOCK(5, P, S) \
    BLOCK(6, P, S) BLOCK(7, P, S) BLOCK(8, P, S)
BLOCKS(1, 0) BLOCKS(2, 0) BLOCKS(3, 0) BLOCKS(2, 1)
#define ROW_TABLE(P, S) {0, block_1_##P##_##S, block_2_##P##_##S, block_3_##P##_##S, block_4_##P##_##S, \
                         block_5_##P##_##S, block_6_##P##_##S, block_7_##P##_##S, block_8_##P##_##S}
static const block_fn TABLE[PANELS + 1][ROWS + 1] = {{0}, ROW_TABLE(1, 0), ROW_TABLE(2, 0), ROW_TABLE(3, 0)};
static const block_fn SWIGLU[ROWS + 1] = ROW_TABLE(2, 1);

/* x [M, K] row-major, w packed [N / 16, K, 16], bias [N] or NULL, res [M, N] or NULL, y [M, N]. */
void gemm(const float *x, long M, long K, const float *w, long N, const float *bias, const float *res,
          float *y, int threads) {
    const long panels = N / 16, groups = (panels + PANELS - 1) / PANELS;
    const long blocks = (M + ROWS - 1) / ROWS, rows = (M + blocks - 1) / blocks; /* even row blocks */
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long g = 0; g < groups; g++) {
        const long first = g * PANELS;
        const int width = panels - first < PANELS ? (int)(panels - first) : PANELS;
        const float *wg = w + first * K * 16;
        const int full_next = g + 2 < groups || (g + 1 < groups && panels % PANELS == 0);
        const float *next = full_next ? wg + (long)width * K * 16 : 0; /* the next group, as wide */
        for (long m = 0; m < M; m += rows) {
            const int r = M - m < rows ? (int)(M - m) : (int)rows;
            TABLE[width][r](x + m * K, K, wg, y + m * N, N, first * 16, bias, res ? res + m * N : 0,
                            m == 0 ? next : 0);
        }
    }
}

/* y [M, N / 2] = silu(x Wg^T) * (x Wu^T) for w packed [N / 16, K, 16] with the gate's and the up
 * projection's panels alternating (gate panel j at 2j, up panel j at 2j + 1). */
void gemm_swiglu(const float *x, long M, long K, const float *w, long N, float *y, int threads) {
    const long pairs = N / 32;
    const long blocks = (M + ROWS - 1) / ROWS, rows = (M + blocks - 1) / blocks;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long g = 0; g < pairs; g++) {
        const float *wg = w + g * 2 * K * 16;
        const float *next = g + 1 < pairs ? wg + 2 * K * 16 : 0;
        for (long m = 0; m < M; m += rows) {
            const int r = M - m < rows ? (int)(M - m) : (int)rows;
            SWIGLU[r](x + m * K, K, wg, y + m * (N / 2), N, g * 32, 0, 0, m == 0 ? next : 0);
        }
    }
}

/* w [N, K] row-major into panels (N a multiple of 16). */
void pack(const float *w, long N, long K, float *out, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long n = 0; n < N; n++)
        for (long k = 0; k < K; k++) out[((n / 16) * K + k) * 16 + n % 16] = w[n * K + k];
}

/* Per row of w [rows, vocab], the float64 sum of each block of `block` entries (the last block may be
 * shorter): out [rows, ceil(vocab / block)]. The sampler's first level (sampler._inverse_cdf), without
 * a float64 copy of the row. */
void block_sums(const float *w, long rows, long vocab, long block, double *out, int threads) {
    const long blocks = (vocab + block - 1) / block;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long r = 0; r < rows; r++) {
        const float *row = w + r * vocab;
        for (long b = 0; b < blocks; b++) {
            const long end = (b + 1) * block < vocab ? (b + 1) * block : vocab;
            long i = b * block;
            __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
            for (; i + 16 <= end; i += 16) {
                __m512 v = _mm512_loadu_ps(row + i);
                lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
                hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
            }
            double sum = _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
            for (; i < end; i++) sum += row[i];
            out[r * blocks + b] = sum;
        }
    }
}
