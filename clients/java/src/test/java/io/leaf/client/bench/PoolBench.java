package io.leaf.client.bench;

import io.leaf.client.LeafClient;
import io.leaf.client.LeafNodes;
import io.leaf.client.pool.IdKind;
import io.leaf.client.pool.IdPool;
import io.leaf.client.pool.PoolOptions;
import io.leaf.client.pool.TagPool;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@code build.sh bench [rounds]}: in one JVM, {@code AtomicLong.incrementAndGet()} on one
 * thread against {@code TagPool.nextId()} per thread (1 thread, then 2), from a warm pool over a
 * real single node the bench starts (with the admin token: anonymous callers have an ID quota). Prints per round the ops/s and the ratio pool/AtomicLong,
 * then the median ratios. Every loop's results are xor-ed into a volatile field (a blackhole) so
 * the JIT cannot drop them.
 */
public final class PoolBench {
    private static final String TAG = "leaf-segment-test";
    private static final long OPS = 20_000_000L;
    static volatile long sink;

    private PoolBench() {
    }

    static long atomicLoop(AtomicLong counter, long ops) {
        long x = 0;
        for (long i = 0; i < ops; i++) {
            x ^= counter.incrementAndGet();
        }
        return x;
    }

    static long poolLoop(TagPool pool, long ops) {
        long x = 0;
        for (long i = 0; i < ops; i++) {
            x ^= pool.nextId();
        }
        return x;
    }

    /** ops/s of the AtomicLong on this thread. */
    static double atomic(long ops) {
        AtomicLong counter = new AtomicLong();
        long t0 = System.nanoTime();
        sink ^= atomicLoop(counter, ops);
        return ops * 1e9 / (System.nanoTime() - t0);
    }

    /** Mean per-thread ops/s of {@code threads} threads taking {@code ops} IDs each. */
    static double pool(TagPool pool, int threads, long ops) throws Exception {
        CyclicBarrier start = new CyclicBarrier(threads);
        double[] rates = new double[threads];
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int me = t;
            Thread th = new Thread(() -> {
                try {
                    start.await();
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
                long t0 = System.nanoTime();
                long x = poolLoop(pool, ops);
                rates[me] = ops * 1e9 / (System.nanoTime() - t0);
                sink ^= x;
            });
            th.start();
            ts.add(th);
        }
        for (Thread th : ts) {
            th.join();
        }
        return Arrays.stream(rates).average().orElse(0);
    }

    static double median(List<Double> xs) {
        double[] a = xs.stream().mapToDouble(Double::doubleValue).sorted().toArray();
        return a.length % 2 == 1 ? a[a.length / 2] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2;
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 5;
        System.out.printf("cpus: %d (availableProcessors); %d ops per measurement%n",
                Runtime.getRuntime().availableProcessors(), OPS);
        try (LeafNodes node = LeafNodes.single();
                LeafClient client = LeafClient.builder().nodes(node.url(1)).token(LeafNodes.TOKEN).build();
                IdPool pool = IdPool.create(client, PoolOptions.defaults())) {
            TagPool ids = pool.segment(TAG);
            // JIT warm-up, and leases grown to their steady size.
            for (int i = 0; i < 5; i++) {
                atomic(OPS);
                pool(ids, 1, OPS);
            }
            pool(ids, 2, OPS);
            List<Double> one = new ArrayList<>();
            List<Double> two = new ArrayList<>();
            for (int r = 1; r <= rounds; r++) {
                double a = atomic(OPS);
                double p1 = pool(ids, 1, OPS);
                double p2 = pool(ids, 2, OPS);
                one.add(p1 / a);
                two.add(p2 / a);
                System.out.printf("round %d: AtomicLong 1 thread %,.0f ops/s | pool 1 thread %,.0f ops/s (x%.2f) | "
                        + "pool 2 threads %,.0f ops/s per thread (x%.2f)%n", r, a, p1, p1 / a, p2, p2 / a);
            }
            System.out.printf("median ratio pool/AtomicLong: 1 thread x%.2f, 2 threads x%.2f per thread (target >= 0.5)%n",
                    median(one), median(two));
            System.out.println("pool: " + pool.stats().get(IdKind.SEGMENT, TAG).orElseThrow());
        }
    }
}
