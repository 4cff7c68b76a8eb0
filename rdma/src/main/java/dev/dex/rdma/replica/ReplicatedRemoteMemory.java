package dev.dex.rdma.replica;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import dev.dex.rdma.ChunkAllocator;
import dev.dex.rdma.FabricException;
import dev.dex.rdma.FencedException;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.OwnedWrites;
import dev.dex.rdma.RemoteMemory;
import dev.dex.rdma.VerbChecks;
import dev.dex.rdma.VerbBatch;
import dev.dex.rdma.VerbCounters;

/**
 * A client of replicated memory servers that makes every change itself on every replica (the compute-side write path,
 * docs/replication.md): for transports whose memory nodes never see a verb, where the primary cannot forward changes.
 *
 * <ul>
 *   <li><b>Reads</b> go to the primary.</li>
 *   <li><b>Writes</b> go to the primary, then to every backup, before they return. The primary first: a copy of the
 *       region that reads the primary, writes the new replica and reads the primary again ({@link RegionCopier}) then
 *       never leaves a newer write behind on the new replica. A write of one aligned word (a lock's release) is
 *       <em>converged</em> onto the backups as an atomic is, never written there blindly: see {@link #isWord}.</li>
 *   <li><b>Atomics</b> run at the primary, which orders them. A compare-and-swap that took effect, and every
 *       fetch-and-add, is then <em>converged</em> onto each backup ({@link Convergence}). Where the primary stamps its
 *       changes ({@link StampedWords}, {@code disni}), each backup stores the change unless it holds a later one. Where
 *       the backup's clients share its {@link WordOrder} ({@code local}), a convergence reads the primary's word and swaps
 *       the backup's for it under the word's stripe, so the swaps follow the primary's order. Elsewhere the backup's word
 *       is swapped for the primary's until a read of the primary after the swap agrees, and convergences of several
 *       clients may run in any order. Either way, at rest every backup holds the primary's word, and an atomic returns
 *       only once its backups held its change or a later one.</li>
 *   <li>A change returns only once every replica of the view has it. If a backup fails it, the backup is reported to
 *       the {@link BackupFailures} listener, which has the group's next view leave it out, and the change waits for
 *       views in which every replica holds it ({@link #awaitViewWithout}); if none comes, it throws a
 *       {@link FabricException}, its outcome unknown, as for any failed verb.</li>
 * </ul>
 *
 * <p>Epochs, the next-chunk index and the instance count change only by atomics, and only grow. Lock words are taken by
 * compare-and-swap and released by a word's write, both converged; a locked node's image is written over its lock word
 * only by the holder, before its release. Lock words take a value again (a tag, 0, the same tag), so a convergence that
 * stalls between its read of the primary and its swap on the backup could move the backup back (ABA) and fix it only
 * in its next round. Stamps ({@code disni}) and one order per word where the backup's clients share a process
 * ({@code local}, {@link WordOrder}) rule that out; with neither the race stays (docs/replication.md, "Known races").
 *
 * <p>Counters count the logical verbs (one per read, write or atomic, whatever the number of replicas), so verbs per
 * operation compare across replica counts.
 *
 * <p>Concurrency: the view of each server is an atomic reference; {@link #install} swaps it in. A verb reads it once
 * and sends every part of itself in that view, so a verb runs wholly in one view: a replica that moved to a newer view
 * refuses it ({@link StaleViewException}). Connections of replaced views stay open until {@link #close}, so a verb still
 * running in an old view fails by the gate, never by a closed connection.
 */
public final class ReplicatedRemoteMemory implements RemoteMemory {
    /** Told of a backup that failed a change; the group's next view should leave it out. Must not block. */
    @FunctionalInterface
    public interface BackupFailures {
        void failed(int serverId, long view, String replica, FabricException cause);
    }

    /** The default longest time a mirror may chase a word that keeps changing on the primary. */
    public static final Duration DEFAULT_MIRROR_TIMEOUT = Duration.ofSeconds(1);

    private final AtomicReference<ReplicaSet>[] groups;
    /** The recent views installed for each server: a change a backup failed counts only by them ({@link #awaitViewWithout}). */
    private final ViewHistory[] installed;
    private final int[] serverIds;
    private final VerbCounters counters = new VerbCounters();
    private final ChunkAllocator chunkAllocator;
    private final long failoverWaitNanos;
    private final ViewWaits waits;
    private final BackupFailures failures;
    private final List<RemoteMemory> connections = new ArrayList<>();
    private final Convergence convergence;
    private final ThreadLocal<long[]> stamps = ThreadLocal.withInitial(() -> new long[2]);
    private final Runnable onClose;
    private volatile boolean closed;

    /**
     * @param groups        each connected server's replicas in its current view
     * @param regionLengths region length of each connected server by id, 0 where not connected
     * @param chunkLengths  chunk length of each connected server by id, 0 where not connected
     * @param mirrorTimeout how long a mirror may chase a word that keeps changing on the primary before the atomic fails
     * @param failures      told of every backup that failed a change
     * @param onClose       run once by {@link #close}, after the connections are closed
     */
    public ReplicatedRemoteMemory(Map<Integer, ReplicaSet> groups, long[] regionLengths, long[] chunkLengths, Duration mirrorTimeout,
                                  BackupFailures failures, Runnable onClose) {
        this(groups, regionLengths, chunkLengths, mirrorTimeout, Duration.ZERO, failures, onClose);
    }

    /**
     * As above; a verb that fails in a view waits up to {@code failoverWait} for a newer view of its server to be
     * installed and runs again there: a read, or a write or an atomic that the primary refused before it ran. A write or
     * an atomic that ran at the primary and then failed on a backup is not sent again: it counts once views every
     * replica of which holds it come ({@link #awaitViewWithout}), and otherwise throws, its outcome unknown.
     */
    public ReplicatedRemoteMemory(Map<Integer, ReplicaSet> groups, long[] regionLengths, long[] chunkLengths, Duration mirrorTimeout,
                                  Duration failoverWait, BackupFailures failures, Runnable onClose) {
        if (groups.isEmpty()) {
            throw new IllegalArgumentException("no memory server to connect to");
        }
        if (mirrorTimeout.isNegative() || mirrorTimeout.isZero()) {
            throw new IllegalArgumentException("the mirror timeout must be positive: " + mirrorTimeout);
        }
        if (failoverWait.isNegative()) {
            throw new IllegalArgumentException("the failover wait must be >= 0: " + failoverWait);
        }
        int max = groups.keySet().stream().mapToInt(Integer::intValue).max().orElseThrow();
        @SuppressWarnings("unchecked")
        AtomicReference<ReplicaSet>[] byServer = new AtomicReference[max + 1];
        this.groups = byServer;
        this.installed = new ViewHistory[max + 1];
        groups.forEach((id, set) -> {
            byServer[id] = new AtomicReference<>(set);
            installed[id] = new ViewHistory(set);
            keep(set);
        });
        this.serverIds = groups.keySet().stream().mapToInt(Integer::intValue).sorted().toArray();
        this.failoverWaitNanos = failoverWait.toNanos();
        this.waits = new ViewWaits(byServer, installed, failoverWaitNanos, () -> closed);
        this.failures = failures;
        this.onClose = onClose;
        this.chunkAllocator = new ChunkAllocator(this::fetchAndAdd, regionLengths, chunkLengths);
        this.convergence = new Convergence(mirrorTimeout.toNanos(), failoverWaitNanos, waits, installed, this::backupFailed);
    }

    /**
     * Moves server {@code serverId} to {@code next}, if it is newer than the view this client is in.
     *
     * @return whether it was installed (false: this client is in that view or a newer one already)
     */
    public boolean install(int serverId, ReplicaSet next) {
        AtomicReference<ReplicaSet> group = groupOf(serverId);
        keep(next);
        installed[serverId].record(next);
        while (true) {
            ReplicaSet now = group.get();
            if (next.view() <= now.view()) {
                next.lease().close();
                return false;
            }
            if (group.compareAndSet(now, next)) {
                now.lease().close(); // a read still in the old view finds it lapsed and moves to this one
                if (closed) {
                    next.lease().close(); // close() may have closed the leases before this one came
                }
                return true;
            }
        }
    }

    /** Whether this client is connected to server {@code serverId}. */
    public boolean connected(int serverId) {
        return serverId >= 0 && serverId < groups.length && groups[serverId] != null;
    }

    /** Server {@code serverId}'s replicas in the view this client is in. */
    public ReplicaSet view(int serverId) {
        return groupOf(serverId).get();
    }

    private AtomicReference<ReplicaSet> groupOf(int serverId) {
        if (!connected(serverId)) {
            throw new IllegalArgumentException("not connected to memory server " + serverId);
        }
        return groups[serverId];
    }

    /**
     * Reads the primary of the view this client is in, under the view's {@link ReadLease}: a read waits for the lease (or
     * a newer view), and one whose lease ran out while it was in flight runs again, since it may have been served after a
     * newer view's first change.
     */
    @Override
    public void read(long address, MutableDirectBuffer dst, int dstOffset, int length) {
        long[] wait = null;
        for (ReplicaSet set = group(address); ; ) {
            if (!set.lease().held()) {
                set = waits.leased(set, address, wait = wait != null ? wait : new long[2]);
            }
            try {
                set.primary().memory().read(address, dst, dstOffset, length);
            } catch (FabricException e) {
                set = waits.next(set, address, e);
                continue;
            }
            if (waits.observe(set, address)) {
                break;
            }
        }
        counters.recordRead(length);
    }

    /** {@link System#nanoTime} of the first verb on {@code serverId} that found no read lease since one ran under it, or 0. */
    public long readsFailingSinceNanos(int serverId) {
        return connected(serverId) ? waits.lapsedSince(serverId) : 0;
    }

    @Override
    public void write(long address, DirectBuffer src, int srcOffset, int length) {
        for (ReplicaSet set = group(address); ; ) {
            long[] stamp = null;
            try {
                if (isWord(address, length) && set.primary().memory() instanceof StampedWords words) {
                    words.writeWord(address, src.getLong(srcOffset, java.nio.ByteOrder.LITTLE_ENDIAN), stamp = stamps.get());
                } else {
                    set.primary().memory().write(address, src, srcOffset, length);
                }
            } catch (FabricException e) {
                // Refused by the primary's gate before it ran: nothing applied anywhere (on disni a write of several
                // words may have landed in part, and goes again whole; a word's write is exact there too), so it may go
                // again in the next view. A write that reached a replica is not sent again: it may change a word another compute node has
                // changed since (a lock word's release), and only the engine knows (docs/replication.md). An owned write
                // (a redo-log append: bytes only this client writes, OwnedWrites) goes again whatever the failure, as over
                // tcp: a second run writes the same bytes where nobody else writes.
                set = waits.next(set, address, OwnedWrites.active() ? e : refused(e));
                continue;
            }
            if (isWord(address, length)) {
                long value = src.getLong(srcOffset, java.nio.ByteOrder.LITTLE_ENDIAN);
                converge(set, address, value, value, stamp, "the mirror of a word's write");
            } else {
                writeBackups(set, address, src, srcOffset, length);
            }
            break;
        }
        counters.recordWrite(length);
    }

    /**
     * Whether a write is of one aligned word, such as a lock's release: it is converged onto the backups as an atomic's
     * change is, never written there blindly. A plain write that reached a backup late could otherwise undo a later
     * atomic of another client that was converged first (a release landing on the backup after the next holder's
     * acquire), and a failover then would promote a backup that shows the lock free.
     */
    private static boolean isWord(long address, int length) {
        return length == Long.BYTES && (GlobalAddress.offset(address) & (Long.BYTES - 1)) == 0;
    }

    private void writeBackups(ReplicaSet set, long address, DirectBuffer src, int srcOffset, int length) {
        List<String> failed = null;
        FabricException failure = null;
        for (ReplicaSet.Replica backup : set.backups()) {
            try {
                backup.memory().write(address, src, srcOffset, length);
            } catch (FabricException e) {
                failure = backupFailed(set, address, backup, "a write", e);
                failed = failed == null ? new ArrayList<>() : failed;
                failed.add(backup.name());
            }
        }
        if (failed != null) {
            waits.awaitViewWithout(set, address, failed, failure, System.nanoTime() + failoverWaitNanos);
        }
    }

    @Override
    public long compareAndSwap(long address, long expected, long desired) {
        long found;
        long[] wait = null;
        for (ReplicaSet set = group(address); ; ) {
            if (!set.lease().held()) {
                set = waits.leased(set, address, wait = wait != null ? wait : new long[2]);
            }
            long[] stamp = set.primary().memory() instanceof StampedWords ? stamps.get() : null;
            try {
                found = stamp != null ? ((StampedWords) set.primary().memory()).compareAndSwap(address, expected, desired, stamp)
                        : set.primary().memory().compareAndSwap(address, expected, desired);
            } catch (FabricException e) {
                set = waits.next(set, address, refused(e)); // a gate refuses a verb before it runs
                continue;
            }
            if (found == expected && expected != desired) {
                // Its failure is of unknown outcome: the swap ran at the primary.
                converge(set, address, expected, desired, stamp, "the mirror of an atomic");
            } else if (!set.lease().held()) {
                continue; // it changed nothing, so it was a read of the primary, and its lease ran out meanwhile: again
            }
            break;
        }
        counters.recordAtomic();
        return found;
    }

    @Override
    public long fetchAndAdd(long address, long delta) {
        long previous;
        long[] wait = null;
        for (ReplicaSet set = group(address); ; ) {
            if (!set.lease().held()) {
                set = waits.leased(set, address, wait = wait != null ? wait : new long[2]);
            }
            long[] stamp = set.primary().memory() instanceof StampedWords ? stamps.get() : null;
            try {
                previous = stamp != null ? ((StampedWords) set.primary().memory()).fetchAndAdd(address, delta, stamp)
                        : set.primary().memory().fetchAndAdd(address, delta);
            } catch (FabricException e) {
                set = waits.next(set, address, refused(e));
                continue;
            }
            if (delta != 0) {
                converge(set, address, previous, previous + delta, stamp, "the mirror of an atomic");
            } else if (!set.lease().held()) {
                continue; // a read of the primary whose lease ran out meanwhile, as a failed swap: again
            }
            break;
        }
        counters.recordAtomic();
        return previous;
    }

    /**
     * {@code failure} of an atomic at the primary, if the primary refused it before it ran (its gate: a newer view, or a
     * replica gone), so that it may run again in a newer view; otherwise thrown: it may have run, and only its caller can
     * tell (a verb of unknown outcome).
     */
    private static FabricException refused(FabricException failure) {
        if (failure instanceof StaleViewException || failure instanceof ReplicaGoneException) {
            return failure;
        }
        throw failure;
    }

    /**
     * Runs a batch of reads and writes of one server pipelined: one batch to the primary, then one of the writes that
     * completed there to each backup, each backup's in flight together; a write counts as done only once every backup
     * has it. A batch with atomics or a word's write, or of several servers, runs verb by verb (the mirrors of atomics wait one by one).
     * The verbs the primary's gate refused before they ran wait for the group's next view and run there, as a single verb
     * does; a write that reached the primary is never sent again. Synchronous: every verb has its outcome when this returns.
     */
    @Override
    public void start(VerbBatch batch) {
        if (batch.isEmpty() || !pipelinable(batch)) {
            batch.runEach(this);
            return;
        }
        batch.started();
        ReplicaSet set = group(batch.address(0));
        int[] todo = new int[batch.size()];
        for (int slot = 0; slot < todo.length; slot++) {
            todo[slot] = slot;
        }
        FabricException[] refusals = new FabricException[batch.size()];
        long[] wait = null;
        while (true) {
            if (!set.lease().held()) {
                try {
                    set = waits.leased(set, batch.address(todo[0]), wait = wait != null ? wait : new long[2]);
                } catch (FabricException noLease) {
                    for (int slot : todo) {
                        batch.fail(slot, noLease);
                    }
                    return;
                }
            }
            int[] refused = runInView(batch, todo, set, refusals);
            if (refused.length == 0) {
                return;
            }
            boolean onlyLapsed = true;
            for (int slot : refused) {
                onlyLapsed &= refusals[slot] instanceof LeaseLapsedException;
            }
            if (onlyLapsed) {
                todo = refused; // reads served after the lease ran out: again once it is held, in this view or a newer one
                continue;
            }
            // The primary's gate refused these before they ran (a newer view, or the replica gone): as a single verb,
            // they wait for the group's next view and run there; the rest kept their outcomes.
            try {
                set = waits.next(set, batch.address(refused[0]), refusals[refused[0]]);
            } catch (FabricException noNewView) {
                for (int slot : refused) {
                    batch.fail(slot, noNewView);
                }
                return;
            }
            todo = refused;
        }
    }

    /**
     * Runs the verbs in {@code slots} of {@code batch} in {@code set}'s view: one batch to the primary, then one of the
     * writes that completed there to each backup. Completes or fails each slot, except those the primary's gate refused
     * before they ran: it returns those, each with its refusal in {@code refusals}.
     */
    private int[] runInView(VerbBatch batch, int[] slots, ReplicaSet set, FabricException[] refusals) {
        VerbBatch onPrimary = new VerbBatch(slots.length);
        for (int slot : slots) {
            copyVerb(batch, slot, onPrimary);
        }
        set.primary().memory().submit(onPrimary);
        boolean leaseLost = !waits.observe(set, batch.address(slots[0]));
        RuntimeException[] failed = new RuntimeException[slots.length];
        boolean[] refusedAt = new boolean[slots.length];
        int refusedCount = 0;
        for (int i = 0; i < slots.length; i++) {
            failed[i] = onPrimary.failure(i);
            if (leaseLost && batch.op(slots[i]) == VerbBatch.READ && failed[i] == null) {
                // Its lease ran out while the batch was in flight: it may have been served after a newer view's first
                // change, so it goes again, as a single read does.
                failed[i] = new LeaseLapsedException("the read lease of view " + set.view() + " ran out during the read");
            }
            // A read that failed at the primary goes again in the next view whatever the failure, as a single read
            // does: it changed nothing. A write only when the primary's gate refused it before it ran.
            boolean readFailed = batch.op(slots[i]) == VerbBatch.READ && failed[i] instanceof FabricException;
            if (readFailed || failed[i] instanceof StaleViewException || failed[i] instanceof ReplicaGoneException) {
                refusedAt[i] = true;
                refusedCount++;
            }
        }
        // Each write the primary took goes to every backup; failedOn[i] names the backups that failed slot i.
        @SuppressWarnings("unchecked")
        List<String>[] failedOn = new List[slots.length];
        RuntimeException[] onBackups = new RuntimeException[slots.length];
        for (ReplicaSet.Replica backup : set.backups()) {
            int[] at = new int[slots.length]; // at[j]: the index in slots of the backup batch's verb j
            VerbBatch onBackup = new VerbBatch(slots.length);
            for (int i = 0; i < slots.length; i++) {
                if (batch.op(slots[i]) == VerbBatch.WRITE && failed[i] == null) {
                    at[onBackup.size()] = i;
                    copyVerb(batch, slots[i], onBackup);
                }
            }
            if (onBackup.isEmpty()) {
                continue;
            }
            backup.memory().submit(onBackup);
            FabricException reported = null; // one report per backup and batch
            for (int j = 0; j < onBackup.size(); j++) {
                RuntimeException failure = onBackup.failure(j);
                if (failure instanceof FabricException fabric) {
                    if (reported == null) {
                        reported = backupFailed(set, batch.address(slots[at[j]]), backup, "a write", fabric);
                    }
                    if (failedOn[at[j]] == null) {
                        failedOn[at[j]] = new ArrayList<>();
                    }
                    failedOn[at[j]].add(backup.name());
                    if (onBackups[at[j]] == null || onBackups[at[j]] instanceof FabricException) {
                        onBackups[at[j]] = reported; // a failure that is not the transport's stays the slot's
                    }
                } else if (failure != null) {
                    onBackups[at[j]] = failure; // not the transport's: the slot fails with it
                }
            }
        }
        long deadline = System.nanoTime() + failoverWaitNanos; // one wait for the whole batch
        int[] refused = new int[refusedCount];
        int r = 0;
        for (int i = 0; i < slots.length; i++) {
            int slot = slots[i];
            RuntimeException failure = failed[i] != null ? failed[i] : onBackups[i];
            if (refusedAt[i]) {
                refused[r++] = slot;
                refusals[slot] = (FabricException) failure;
                continue;
            }
            if (failed[i] == null && failure instanceof FabricException fabric) {
                try {
                    waits.awaitViewWithout(set, batch.address(slot), failedOn[i], fabric, deadline);
                    failure = null; // on every replica of a newer view
                } catch (FabricException stillUnknown) {
                    failure = stillUnknown;
                }
            }
            if (failure != null) {
                batch.fail(slot, failure);
                continue;
            }
            if (batch.op(slot) == VerbBatch.READ) {
                counters.recordRead(batch.length(slot));
            } else {
                counters.recordWrite(batch.length(slot));
            }
            batch.complete(slot, 0);
        }
        return refused;
    }

    /** Whether every verb of {@code batch} is a read or a write (not of one word) of one server this client is connected to. */
    private boolean pipelinable(VerbBatch batch) {
        long first = batch.address(0);
        if (GlobalAddress.isSwizzled(first)) {
            return false;
        }
        int server = GlobalAddress.serverId(first);
        if (!connected(server) || closed) {
            return false;
        }
        for (int slot = 0; slot < batch.size(); slot++) {
            byte op = batch.op(slot);
            long address = batch.address(slot);
            if (op != VerbBatch.READ && op != VerbBatch.WRITE || GlobalAddress.isSwizzled(address)
                    || GlobalAddress.serverId(address) != server || op == VerbBatch.WRITE && isWord(address, batch.length(slot))) {
                return false;
            }
        }
        return true;
    }

    /** Adds the read or write in {@code slot} of {@code batch} to {@code into}. */
    private static void copyVerb(VerbBatch batch, int slot, VerbBatch into) {
        if (batch.op(slot) == VerbBatch.READ) {
            into.read(batch.address(slot), batch.destination(slot), batch.bufferOffset(slot), batch.length(slot));
        } else {
            into.write(batch.address(slot), batch.source(slot), batch.bufferOffset(slot), batch.length(slot));
        }
    }

    /** Converges a change at the primary onto its backups: by its stamp where the primary gave one ({@link Convergence}). */
    private void converge(ReplicaSet set, long address, long before, long after, long[] stamp, String what) {
        if (stamp != null) {
            convergence.stamped(set, address, before, after, stamp[0], stamp[1], what);
        } else {
            convergence.converge(set, address, before, after, what);
        }
    }

    private FabricException backupFailed(ReplicaSet set, long address, ReplicaSet.Replica backup, String what, FabricException cause) {
        if (cause instanceof StaleViewException stale) {
            return stale; // the group moved on: the caller installs the new view; the backup did nothing wrong
        }
        if (cause instanceof FencedException fenced) {
            return fenced; // this client is fenced (fences reach the replicas one at a time): not the backup's fault
        }
        int serverId = GlobalAddress.serverId(address);
        try {
            failures.failed(serverId, set.view(), backup.name(), cause);
        } catch (RuntimeException listener) {
            cause.addSuppressed(listener);
        }
        return new FabricException("memory server " + serverId + "'s backup " + backup.name() + " failed " + what + " in view "
                + set.view() + ": the change is on the primary but not on every replica, so it does not count; it can once the"
                + " group's next view leaves that backup out (" + cause.getMessage() + ")", cause);
    }

    private ReplicaSet group(long address) {
        return VerbChecks.server(groups, address, closed).get();
    }

    private synchronized void keep(ReplicaSet set) {
        if (closed) {
            set.lease().close();
            throw new IllegalStateException("remote memory is closed");
        }
        for (ReplicaSet.Replica replica : all(set)) {
            if (connections.stream().noneMatch(c -> c == replica.memory())) {
                connections.add(replica.memory());
            }
        }
    }

    private static List<ReplicaSet.Replica> all(ReplicaSet set) {
        List<ReplicaSet.Replica> all = new ArrayList<>();
        all.add(set.primary());
        all.addAll(set.backups());
        return all;
    }

    @Override
    public int[] memoryServerIds() {
        return serverIds.clone();
    }

    @Override
    public VerbCounters counters() {
        return counters;
    }

    @Override
    public ChunkAllocator chunkAllocator() {
        return chunkAllocator;
    }

    /** Closes every replica connection this client was given, in every view. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        for (AtomicReference<ReplicaSet> group : groups) {
            if (group != null) {
                group.get().lease().close();
            }
        }
        for (RemoteMemory connection : connections) {
            connection.close();
        }
        connections.clear();
        onClose.run();
    }
}
