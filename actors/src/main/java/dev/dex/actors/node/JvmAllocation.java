package dev.dex.actors.node;

import java.lang.management.ManagementFactory;

/**
 * What this JVM allocated on its heap since it started, for the benches' bytes per operation: a compute node reports it
 * in its {@link ComputeNode.Status}, named by its JVM ({@link #jvm}), so that nodes sharing one JVM are counted once.
 * {@code -1} where the JVM does not measure it.
 *
 * <p>Concurrency: stateless; the JVM's counter is read atomically enough for a difference over seconds.
 */
public final class JvmAllocation {
    private static final String JVM = ProcessHandle.current().pid() + "@" + ManagementFactory.getRuntimeMXBean().getStartTime();

    private JvmAllocation() {
    }

    /** This JVM: its process id and start time. */
    public static String jvm() {
        return JVM;
    }

    /** Bytes this JVM's threads allocated on the heap since it started (terminated threads included), or -1. */
    public static long allocatedBytes() {
        if (ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean threads
                && threads.isThreadAllocatedMemorySupported() && threads.isThreadAllocatedMemoryEnabled()) {
            return threads.getTotalThreadAllocatedBytes();
        }
        return -1;
    }
}
