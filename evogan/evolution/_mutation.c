/* Point mutation with counter-based random numbers: the C twin of the numpy code in
 * evogan/evolution/operators.py, which it must match bit for bit (lineages are replayed on
 * whichever path a node has). Random bits are splitmix64 of (seed, counter); a child's
 * mutated positions are those whose key is among the `chosen` smallest, taken in ascending
 * order, and the t-th of them gets power * (2u - 1) with u from 52 random bits, added in
 * float32. */
#include <stdint.h>
#include <string.h>

static inline uint64_t mix(uint64_t seed, uint64_t counter) {
    uint64_t z = counter * 0x9E3779B97F4A7C15ULL + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* The k-th smallest (0-based) of values[0..n), by quickselect; values is reordered. */
static uint64_t kth_smallest(uint64_t *values, int64_t n, int64_t k) {
    int64_t low = 0, high = n - 1;
    while (low < high) {
        uint64_t pivot = values[low + (high - low) / 2];
        int64_t i = low, j = high;
        while (i <= j) {
            while (values[i] < pivot) i++;
            while (values[j] > pivot) j--;
            if (i <= j) {
                uint64_t swap = values[i];
                values[i++] = values[j];
                values[j--] = swap;
            }
        }
        if (k <= j) high = j;
        else if (k >= i) low = i;
        else return values[k];
    }
    return values[k];
}

/* The k-th smallest (0-based) of keys[0..n): a histogram of the top 11 bits finds the bucket
 * that holds it (random keys spread evenly), quickselect settles it among that bucket's few
 * keys, gathered into work. */
static uint64_t kth_smallest_key(const uint64_t *keys, int64_t n, int64_t k, uint64_t *work) {
    uint32_t counts[2048] = {0};
    for (int64_t j = 0; j < n; j++) counts[keys[j] >> 53]++;
    int64_t below = 0;
    uint64_t bucket = 0;
    while (below + counts[bucket] <= k) below += counts[bucket++];
    int64_t gathered = 0;
    for (int64_t j = 0; j < n; j++)
        if (keys[j] >> 53 == bucket) work[gathered++] = keys[j];
    return kth_smallest(work, gathered, k - below);
}

/* Adds child `child`'s mutation to row (which holds the parent) in place. */
static void mutate_row(float *row, int64_t size, int64_t chosen, uint64_t position_seed,
                       uint64_t value_seed, int64_t child, double power, uint64_t *scratch) {
    uint64_t *keys = scratch, *work = scratch + size;
    uint64_t threshold = UINT64_MAX;
    if (chosen < size) {
        for (int64_t j = 0; j < size; j++)
            keys[j] = mix(position_seed, (uint64_t)(child * size + j));
        threshold = kth_smallest_key(keys, size, chosen - 1, work);
    }
    int64_t taken = 0;
    for (int64_t j = 0; j < size && taken < chosen; j++) {
        if (chosen < size && keys[j] > threshold) continue;
        uint64_t bits = mix(value_seed, (uint64_t)(child * chosen + taken)) >> 12;
        double unit = (double)((int64_t)(bits << 1) - ((int64_t)1 << 52)) * 0x1p-52;
        float change = (float)(unit * power);
        row[j] = row[j] + change;
        taken++;
    }
}

/* Children first .. first+children-1 of `parent` into out (children x size); scratch holds
 * 2 * size words. Returns 0, or 1 for arguments out of range. */
int evogan_point_mutation(const float *parent, int64_t size, int64_t chosen,
                          uint64_t position_seed, uint64_t value_seed, int64_t first,
                          int64_t children, double power, float *out, uint64_t *scratch) {
    if (size <= 0 || chosen <= 0 || chosen > size || children < 0 || first < 0) return 1;
    for (int64_t c = 0; c < children; c++) {
        memcpy(out + c * size, parent, (size_t)size * sizeof(float));
        mutate_row(out + c * size, size, chosen, position_seed, value_seed, first + c, power,
                   scratch);
    }
    return 0;
}

/* A lineage replay: step s turns genome (in place) into its child `child[s]`, as
 * evogan_point_mutation would make it. Returns 0, or 1 for arguments out of range. */
int evogan_point_replay(float *genome, int64_t size, int64_t steps, const int64_t *chosen,
                        const uint64_t *position_seeds, const uint64_t *value_seeds,
                        const int64_t *child, const double *power, uint64_t *scratch) {
    if (size <= 0 || steps < 0) return 1;
    for (int64_t s = 0; s < steps; s++) {
        if (chosen[s] <= 0 || chosen[s] > size || child[s] < 0) return 1;
        mutate_row(genome, size, chosen[s], position_seeds[s], value_seeds[s], child[s],
                   power[s], scratch);
    }
    return 0;
}
