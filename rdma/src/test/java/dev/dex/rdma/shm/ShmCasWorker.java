package dev.dex.rdma.shm;

import java.nio.file.Path;

import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.RemoteMemory;

/**
 * The second process of {@link ShmCrossProcessTest}: connects to a region another JVM exported and,
 * through its own mapping only, writes a pattern, raises a ready flag, waits for the go flag, then
 * CAS-increments a shared counter.
 *
 * <p>Arguments: region directory, memory server id, offset of the work area, increments. Exit code 0 on
 * success, 2 when the go flag never comes; an exception exits with 1 and its stack trace.
 *
 * <pre>
 * work area:  +0 counter | +8 ready flag | +16 go flag | ... | +64 pattern (1 KiB)
 * </pre>
 */
public final class ShmCasWorker {
    static final int COUNTER_OFFSET = 0;
    static final int READY_OFFSET = COUNTER_OFFSET + Long.BYTES;
    static final int GO_OFFSET = READY_OFFSET + Long.BYTES;
    static final int PATTERN_OFFSET = 64;
    static final int PATTERN_LENGTH = 1024;
    static final long GO_TIMEOUT_NS = 20_000_000_000L;

    private ShmCasWorker() {
    }

    /** Byte {@code i} of the pattern: "DEX" and the index, so a wrong offset or a stale region shows. */
    static byte patternByte(int i) {
        return switch (i % 4) {
            case 0 -> 'D';
            case 1 -> 'E';
            case 2 -> 'X';
            default -> (byte) (i >>> 2);
        };
    }

    public static void main(String[] args) {
        Path directory = Path.of(args[0]);
        int serverId = Integer.parseInt(args[1]);
        long area = GlobalAddress.of(serverId, Long.parseLong(args[2]));
        int increments = Integer.parseInt(args[3]);
        try (ShmFabric fabric = new ShmFabric(directory); RemoteMemory memory = fabric.connect(serverId)) {
            UnsafeBuffer pattern = new UnsafeBuffer(new byte[PATTERN_LENGTH]);
            for (int i = 0; i < PATTERN_LENGTH; i++) {
                pattern.putByte(i, patternByte(i));
            }
            memory.write(area + PATTERN_OFFSET, pattern, 0, PATTERN_LENGTH);
            memory.fetchAndAdd(area + READY_OFFSET, 1);

            UnsafeBuffer word = new UnsafeBuffer(new byte[Long.BYTES]);
            long deadline = System.nanoTime() + GO_TIMEOUT_NS;
            do {
                if (System.nanoTime() > deadline) {
                    System.out.println("worker: no go flag within " + GO_TIMEOUT_NS / 1_000_000 + " ms");
                    System.exit(2);
                }
                Thread.onSpinWait();
                memory.read(area + GO_OFFSET, word, 0, Long.BYTES);
            } while (word.getLong(0) == 0);

            long retries = 0;
            for (int i = 0; i < increments; i++) {
                while (true) {
                    memory.read(area + COUNTER_OFFSET, word, 0, Long.BYTES);
                    long old = word.getLong(0);
                    if (memory.compareAndSwap(area + COUNTER_OFFSET, old, old + 1) == old) {
                        break;
                    }
                    retries++;
                }
            }
            System.out.println("worker: " + increments + " increments, " + retries + " CAS retries");
        }
    }
}
