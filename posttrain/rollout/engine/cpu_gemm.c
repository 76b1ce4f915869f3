/* Float32 products y = x W^T (+ bias) (+ residual) for the native engine's CPU forward, AVX-512.
 *
 * The weight is packed once into panels of 16 output columns, k-major: element (n, k) of W [N, K]
 * lies at ((n / 16) * K + k) * 16 + n % 16, so one 64-byte load holds a row of 16 columns at one k.
 * Each call walks groups of PANELS panels (one OpenMP thread per share of the groups) and, per group,
 * blocks of at most ROWS rows of x: ROWS x PANELS accumulators stay in registers through the whole
 * k loop (one weight load per panel and k, one broadcast of x per row and k, PANELS fused multiply-adds
 * per broadcast), so every sum over k is a plain sequence of fused multiply-adds in k order. While the
 * first row block of a group runs, the next group's panels are prefetched into L2: the weight streams
 * from memory once per call, which is what bounds a decode step's products (a few dozen rows).
 * Built and loaded by cpu_gemm.py; nothing here allocates.
 */
#include <immintrin.h>
#include <omp.h>

#define PANELS 3
#define ROWS 8

static inline __attribute__((always_inline)) void block(const int rows, const int panels, const float *x,
                                                        long K, const float *w, float *y, long N, long n0,
                                                        const float *bias, const float *res,
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
#define BLOCK(R, P)                                                                                      \
    static void block_##R##_##P(const float *x, long K, const float *w, float *y, long N, long n0,        \
                                const float *bias, const float *res, const float *next) {                \
        block(R, P, x, K, w, y, N, n0, bias, res, next);                                                 \
    }
#define BLOCKS(P) BLOCK(1, P) BLOCK(2, P) BLOCK(3, P) BLOCK(4, P) BLOCK(5, P) BLOCK(6, P) BLOCK(7, P) BLOCK(8, P)
BLOCKS(1) BLOCKS(2) BLOCKS(3)
#define ROW_TABLE(P) {0, block_1_##P, block_2_##P, block_3_##P, block_4_##P, block_5_##P, block_6_##P, \
                      block_7_##P, block_8_##P}
static const block_fn TABLE[PANELS + 1][ROWS + 1] = {{0}, ROW_TABLE(1), ROW_TABLE(2), ROW_TABLE(3)};

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

/* w [N, K] row-major into panels (N a multiple of 16). */
void pack(const float *w, long N, long K, float *out, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (long n = 0; n < N; n++)
        for (long k = 0; k < K; k++) out[((n / 16) * K + k) * 16 + n % 16] = w[n * K + k];
}
