/* Dropout keep-masks from a counter hash, split over POSIX threads.
 *
 * keep[i] = (mix32((mix32(i) + key) mod 2^32) >> 8) >= threshold: the mask that
 * evogan.gan3d.model.blocks.counter_uniform(key, shape) >= p gives, with threshold = ceil(p * 2^24)
 * in float32, computed by the caller. torch draws a CPU generator's numbers one after another
 * on one thread; a hash of the element's index is the same mask on any number of threads. */
#include <pthread.h>
#include <stdint.h>

#define MAX_THREADS 256

static inline uint32_t mix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x7FEB352DU;
    h ^= h >> 15;
    h *= 0x846CA68BU;
    return h ^ (h >> 16);
}

struct job {
    uint8_t *keep;
    uint32_t key, threshold;
    long begin, end;
};

static void *run(void *argument) {
    const struct job *job = argument;
    uint8_t *keep = job->keep + job->begin;
    const uint32_t first = (uint32_t)job->begin, key = job->key, threshold = job->threshold;
    const long count = job->end - job->begin;
    for (long j = 0; j < count; j++)  /* 32-bit lanes: the compiler vectorises this loop */
        keep[j] = (mix32(mix32(first + (uint32_t)j) + key) >> 8) >= threshold;
    return NULL;
}

/* Returns 0, or -1 for bad arguments (more than 2^32 elements, a threshold above 2^24, a
 * thread count out of range). A thread that cannot be started has its share run by the caller. */
int evogan_keep_mask(uint8_t *keep, long count, long key, long threshold, int threads) {
    if (count < 0 || count > 4294967296L || key < 0 || key > 4294967295L || threshold < 0 ||
        threshold > 16777216L || threads < 1 || threads > MAX_THREADS)
        return -1;
    long per_thread = 1L << 16;
    if ((long)threads * per_thread > count) threads = (int)(count / per_thread) + 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    struct job jobs[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int i = 0; i < threads; i++)
        jobs[i] = (struct job){keep, (uint32_t)key, (uint32_t)threshold, count * i / threads,
                               count * (i + 1) / threads};
    for (int i = 1; i < threads; i++) started[i] = pthread_create(&ids[i], NULL, run, &jobs[i]) == 0;
    run(&jobs[0]);
    for (int i = 1; i < threads; i++) {
        if (started[i]) pthread_join(ids[i], NULL);
        else run(&jobs[i]);
    }
    return 0;
}
