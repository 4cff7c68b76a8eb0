package dev.dex.bench;

import dev.dex.core.engine.IndexSession;

/** Sends one worker thread's operations to the session of the engine that serves each key. */
interface Router extends AutoCloseable {

    /** The session to run an operation on {@code key} with (for a scan: its start key). */
    IndexSession sessionFor(long key);

    /** The partition of {@code key}, for grouping operations into per-partition batches; 0 if unpartitioned. */
    default int partitionOf(long key) {
        return 0;
    }

    /** How many partitions {@link #partitionOf} may answer. */
    default int partitions() {
        return 1;
    }

    @Override
    void close();

    /** A router for an engine that serves every key: one session for everything. */
    static Router of(IndexSession session) {
        return new Router() {
            @Override
            public IndexSession sessionFor(long key) {
                return session;
            }

            @Override
            public void close() {
                session.close();
            }
        };
    }
}
