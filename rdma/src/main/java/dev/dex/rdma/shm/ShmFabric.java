package dev.dex.rdma.shm;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.io.UncheckedIOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

import org.agrona.IoUtil;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import dev.dex.rdma.DirectRemoteMemory;
import dev.dex.rdma.ExportedRegion;
import dev.dex.rdma.Fabric;
import dev.dex.rdma.GlobalAddress;
import dev.dex.rdma.Region;
import dev.dex.rdma.RegionFormat;
import dev.dex.rdma.RemoteMemory;

/**
 * The {@code shm} transport: each memory server's region is a file, {@code region-<serverId>.dex} in the
 * fabric's directory (default {@code /dev/shm/dex}, a tmpfs on Linux), that every process of the
 * host maps shared. A compute process connects to regions exported by another process simply by mapping
 * the same directory; its verbs are loads, stores and atomic instructions on its own mapping, so the
 * exporting process takes no part in them: they are truly one-sided. An optional latency per verb (spun,
 * in nanoseconds) emulates the round trip of RDMA.
 *
 * <p>Lifecycle: {@link #export} writes a fresh, zeroed and formatted region to a temporary file of the
 * directory and renames it to {@code region-<serverId>.dex}, replacing any stale file of an earlier run, so
 * a connecting process never maps a half-made region and a process still mapping the replaced file keeps
 * its (now private) memory. The file is sparse (the file system allocates a page when it is first
 * touched) and has mode {@code 0600}, so the processes sharing a pool run as one user. Export refuses a
 * region larger than the free space of the directory's file system, because touching a page the file
 * system cannot supply raises SIGBUS; the check is per region, so several sparse regions may still
 * overcommit.
 *
 * <p>{@link #connect} maps the files it names, whichever process exported them; {@link RemoteMemory#close()}
 * unmaps that client's mappings. {@link ExportedRegion#close()} and {@link #close()} unmap the exporter's
 * mapping and delete the file (unless another export has since replaced it): clients that connect
 * afterwards fail, while clients already connected keep their mappings until they close, as the kernel
 * frees the memory only with its last mapping. Paths and renames assume a POSIX file system.
 *
 * <p>{@link #attach} is how a memory node starts: it takes {@code region-<serverId>.lock} (an exclusive file
 * lock, held until the region is closed or detached, so a second process serving the same server id on this
 * host is refused) and maps the existing region file with its data, or exports a fresh one when there is none.
 * {@link ExportedRegion#detach()} unmaps and unlocks but keeps the file, so a memory node that stops and starts
 * again finds its data. {@link #reformat} is how a memory node started with a format begins: it takes the same
 * lock first, and only then replaces the region file with a fresh one, so a second memory node of a served
 * server id is refused before it can replace the file under the first.
 *
 * <p>Concurrency: export, {@link ExportedRegion#close()} and {@link #close()} synchronize on the fabric;
 * connect takes no lock, and verbs never do. Bulk copies are plain; 8-byte words are volatile loads and
 * stores or hardware atomics on a shared mapping, hence atomic and ordered across every process that
 * maps the region. Unmapping is immediate: a client, or the {@link ExportedRegion#region() region} of an
 * export, must be closed only once no thread still uses it, as RDMA memory must not be deregistered with
 * work in flight; an access to an unmapped page crashes the JVM.
 */
public final class ShmFabric implements Fabric {
    /**
     * Where regions live unless configured otherwise ({@code dex.fabric.shm-directory} of this module's
     * reference.conf): a tmpfs, so regions never touch a disk.
     */
    public static final String DEFAULT_DIRECTORY = com.typesafe.config.ConfigFactory.defaultReferenceUnresolved()
            .getString("dex.fabric.shm-directory");

    /** Segments of 1 GiB keep every mapping within a Java buffer's 2 GiB limit, as for {@code local}. */
    static final int SEGMENT_SHIFT = Region.DEFAULT_SEGMENT_SHIFT;

    private final Path directory;
    private final long latencyNs;
    private final Map<Integer, ShmRegion> exported = new HashMap<>();

    /** A fabric on {@code directory} with no injected latency. */
    public ShmFabric(Path directory) {
        this(directory, 0);
    }

    /**
     * @param directory where region files are created and looked up; created on the first export
     * @param latencyNs latency spun before every verb, 0 for none
     */
    public ShmFabric(Path directory, long latencyNs) {
        if (latencyNs < 0) {
            throw new IllegalArgumentException("latency must be >= 0 ns: " + latencyNs);
        }
        this.directory = Objects.requireNonNull(directory, "directory");
        this.latencyNs = latencyNs;
    }

    @Override
    public String transport() {
        return "shm";
    }

    /** Where this fabric's region files live. */
    public Path directory() {
        return directory;
    }

    /** The file that holds {@code serverId}'s region. */
    public Path regionFile(int serverId) {
        return directory.resolve("region-" + serverId + ".dex");
    }

    /** The lock file a memory node holds while it serves {@code serverId}'s region ({@link #attach}). */
    public Path lockFile(int serverId) {
        return directory.resolve("region-" + serverId + ".lock");
    }

    @Override
    public synchronized ExportedRegion export(int serverId, long regionLength, int chunkLength) {
        RegionFormat.checkLengths(serverId, regionLength, chunkLength);
        if (exported.containsKey(serverId)) {
            throw new IllegalArgumentException("memory server " + serverId + " already exported on this shm fabric");
        }
        return create(serverId, regionLength, chunkLength, null);
    }

    /**
     * Reattaches to {@code serverId}'s region file, data and all, or exports a fresh region when there is none;
     * holds the server id's lock file meanwhile. Refuses a region file of other lengths (start the memory node
     * with a format to replace it) and a server id another process serves.
     */
    @Override
    public synchronized ExportedRegion attach(int serverId, long regionLength, int chunkLength) {
        RegionFormat.checkLengths(serverId, regionLength, chunkLength);
        if (exported.containsKey(serverId)) {
            throw new IllegalStateException("memory server " + serverId + " already exported on this shm fabric");
        }
        ServerLock lock = ServerLock.take(this, serverId);
        try {
            Path file = regionFile(serverId);
            if (!Files.exists(file)) {
                return create(serverId, regionLength, chunkLength, lock);
            }
            MappedByteBuffer[] mappings = mapExisting(serverId);
            try {
                Region region = region(mappings);
                long chunk = RegionFormat.check(serverId, region);
                if (region.length() != regionLength || chunk != chunkLength) {
                    throw new IllegalArgumentException("the region file " + file + " of memory server " + serverId + " holds "
                            + region.length() + " bytes in chunks of " + chunk + ", not " + regionLength + " in chunks of "
                            + chunkLength + ": start it with those settings, or format it (which discards its data)");
                }
                ShmRegion shmRegion = new ShmRegion(serverId, file, fileKey(file), region, mappings, false, lock);
                exported.put(serverId, shmRegion);
                return shmRegion;
            } catch (IOException e) {
                unmap(mappings);
                throw new UncheckedIOException("cannot reattach memory server " + serverId + " at " + file, e);
            } catch (RuntimeException e) {
                unmap(mappings);
                throw e;
            }
        } catch (RuntimeException e) {
            lock.release();
            throw e;
        }
    }

    /**
     * Takes {@code serverId}'s lock file, then writes a fresh region file in place of any kept one and maps it;
     * holds the lock meanwhile, as {@link #attach} does. Refuses a server id another process serves, leaving its
     * region file alone.
     */
    @Override
    public synchronized ExportedRegion reformat(int serverId, long regionLength, int chunkLength) {
        RegionFormat.checkLengths(serverId, regionLength, chunkLength);
        if (exported.containsKey(serverId)) {
            throw new IllegalStateException("memory server " + serverId + " already exported on this shm fabric");
        }
        ServerLock lock = ServerLock.take(this, serverId);
        try {
            return create(serverId, regionLength, chunkLength, lock);
        } catch (RuntimeException e) {
            lock.release();
            throw e;
        }
    }

    /** Writes a fresh region file and maps it; {@code lock}, if any, goes with the region. */
    private ExportedRegion create(int serverId, long regionLength, int chunkLength, ServerLock lock) {
        Path file = regionFile(serverId);
        Path temporary = null;
        MappedByteBuffer[] mappings = null;
        try {
            secureDirectory(directory, true);
            long usable = Files.getFileStore(directory).getUsableSpace();
            if (regionLength > usable) {
                // Touching a page the file system cannot supply raises SIGBUS later; refuse now instead.
                throw new IllegalArgumentException("region of " + regionLength + " bytes for memory server " + serverId
                        + " does not fit in the " + usable + " bytes free at " + directory);
            }
            temporary = Files.createTempFile(directory, "region-" + serverId + "-", ".dex.tmp");
            try (RandomAccessFile created = new RandomAccessFile(temporary.toFile(), "rw")) {
                // Extending by setLength leaves a hole: pages are allocated, zeroed, when first touched.
                created.setLength(regionLength);
                mappings = map(created.getChannel(), regionLength);
            }
            Region region = region(mappings);
            RegionFormat.format(region, chunkLength);
            Object fileKey = fileKey(temporary);
            Files.move(temporary, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            ShmRegion shmRegion = new ShmRegion(serverId, file, fileKey, region, mappings, true, lock);
            exported.put(serverId, shmRegion);
            return shmRegion;
        } catch (IOException e) {
            abandon(mappings, temporary);
            throw new UncheckedIOException("cannot export memory server " + serverId + " at " + file, e);
        } catch (RuntimeException e) {
            abandon(mappings, temporary);
            throw e;
        }
    }

    @Override
    public RemoteMemory connect(int... serverIds) {
        if (serverIds.length == 0) {
            throw new IllegalArgumentException("connect needs at least one memory server id");
        }
        int max = 0;
        for (int id : serverIds) {
            if (id < 0 || id > GlobalAddress.MAX_SERVER_ID) {
                throw new IllegalArgumentException("memory server id " + id + " outside [0, " + GlobalAddress.MAX_SERVER_ID + "]");
            }
            max = Math.max(max, id);
        }
        Region[] byId = new Region[max + 1];
        List<MappedByteBuffer> mapped = new ArrayList<>();
        try {
            for (int id : serverIds) {
                if (byId[id] == null) {
                    MappedByteBuffer[] mappings = mapExisting(id);
                    mapped.addAll(List.of(mappings));
                    byId[id] = region(mappings);
                }
            }
            MappedByteBuffer[] all = mapped.toArray(new MappedByteBuffer[0]);
            return new DirectRemoteMemory(byId, latencyNs, () -> unmap(all));
        } catch (RuntimeException e) {
            unmap(mapped.toArray(new MappedByteBuffer[0]));
            throw e;
        }
    }

    @Override
    public synchronized void close() {
        for (ShmRegion region : List.copyOf(exported.values())) {
            region.close();
        }
    }

    private MappedByteBuffer[] mapExisting(int serverId) {
        Path file = regionFile(serverId);
        try {
            secureDirectory(directory, false);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot check " + directory, e);
        }
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            return map(channel, channel.size());
        } catch (NoSuchFileException e) {
            throw new IllegalArgumentException("memory server " + serverId + " has not exported a region: no file " + file, e);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot map the region of memory server " + serverId + " at " + file, e);
        }
    }

    /**
     * Creates {@code directory} owner-only (0700) when {@code create} and it does not exist, and refuses one that
     * another user owns or that others may write: whoever can write the directory can put a region file of
     * their own in place of a memory node's, and read or change the index through it. (Earlier versions
     * created it 0755, which passes: only its owner may write it.)
     */
    static void secureDirectory(Path directory, boolean create) throws IOException {
        if (create && !Files.exists(directory)) {
            try {
                Files.createDirectories(directory, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            } catch (java.nio.file.FileAlreadyExistsException raced) {
                // another process made it meanwhile: checked below like any existing directory
            }
        }
        if (!Files.exists(directory)) {
            return;
        }
        java.nio.file.attribute.PosixFileAttributes attributes;
        try {
            attributes = Files.readAttributes(directory, java.nio.file.attribute.PosixFileAttributes.class);
        } catch (UnsupportedOperationException notPosix) {
            return;
        }
        java.nio.file.attribute.UserPrincipal me = processOwner(directory);
        if (me != null && !attributes.owner().equals(me)) {
            throw new IllegalStateException("the shm directory " + directory + " belongs to " + attributes.owner().getName()
                    + ", not to " + me.getName() + " who runs this node: another user could put their own region files there;"
                    + " remove it, or give this node a directory of its own (--shm-dir)");
        }
        Set<java.nio.file.attribute.PosixFilePermission> permissions = attributes.permissions();
        if (permissions.contains(java.nio.file.attribute.PosixFilePermission.GROUP_WRITE)
                || permissions.contains(java.nio.file.attribute.PosixFilePermission.OTHERS_WRITE)) {
            throw new IllegalStateException("the shm directory " + directory + " may be written by others (mode "
                    + PosixFilePermissions.toString(permissions) + "): they could put their own region files there; make it"
                    + " owner-only (chmod 700 " + directory + ") or give this node another directory (--shm-dir)");
        }
    }

    /** The user this process runs as (the owner of /proc/self on Linux), or null if it cannot be told. */
    private static java.nio.file.attribute.UserPrincipal processOwner(Path directory) throws IOException {
        Path self = Path.of("/proc/self");
        if (Files.exists(self)) {
            return Files.getOwner(self);
        }
        try {
            return directory.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByName(System.getProperty("user.name"));
        } catch (java.nio.file.attribute.UserPrincipalNotFoundException | UnsupportedOperationException unknown) {
            return null;
        }
    }

    /** Maps {@code length} bytes of {@code channel} in 1 GiB segments; the last may be shorter. */
    private static MappedByteBuffer[] map(FileChannel channel, long length) throws IOException {
        int count = (int) ((length + (1L << SEGMENT_SHIFT) - 1) >>> SEGMENT_SHIFT);
        MappedByteBuffer[] mappings = new MappedByteBuffer[count];
        try {
            for (int i = 0; i < count; i++) {
                long position = (long) i << SEGMENT_SHIFT;
                mappings[i] = channel.map(FileChannel.MapMode.READ_WRITE, position, Math.min(1L << SEGMENT_SHIFT, length - position));
            }
        } catch (IOException | RuntimeException e) {
            unmap(mappings);
            throw e;
        }
        return mappings;
    }

    private static Region region(MappedByteBuffer[] mappings) {
        AtomicBuffer[] segments = new AtomicBuffer[mappings.length];
        for (int i = 0; i < mappings.length; i++) {
            segments[i] = new UnsafeBuffer(mappings[i]);
        }
        return new Region(segments, SEGMENT_SHIFT);
    }

    private static void unmap(MappedByteBuffer[] mappings) {
        if (mappings != null) {
            for (MappedByteBuffer mapping : mappings) {
                if (mapping != null) {
                    IoUtil.unmap(mapping);
                }
            }
        }
    }

    private static Object fileKey(Path file) throws IOException {
        return Files.readAttributes(file, BasicFileAttributes.class).fileKey();
    }

    /** Undoes a failed export; once renamed, the temporary file is gone and the published one stays. */
    private static void abandon(MappedByteBuffer[] mappings, Path temporary) {
        unmap(mappings);
        if (temporary != null) {
            try {
                Files.deleteIfExists(temporary);
            } catch (IOException ignored) {
                // The export already failed; a leftover temporary file is harmless and its name says what it is.
            }
        }
    }

    /** The exclusive lock on a server id's lock file, held by the process that attached its region. */
    private record ServerLock(FileChannel channel, FileLock lock) {
        static ServerLock take(ShmFabric fabric, int serverId) {
            Path path = fabric.lockFile(serverId);
            FileChannel channel = null;
            try {
                secureDirectory(fabric.directory, true);
                channel = Files.exists(path)
                        ? FileChannel.open(path, StandardOpenOption.WRITE)
                        : FileChannel.open(path, Set.of(StandardOpenOption.CREATE, StandardOpenOption.WRITE),
                                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
                FileLock lock;
                try {
                    lock = channel.tryLock();
                } catch (OverlappingFileLockException heldHere) {
                    lock = null;
                }
                if (lock == null) {
                    throw new IllegalStateException("memory server " + serverId + " is served by another memory node on this host"
                            + " already (" + path + " is locked): give this one another server id");
                }
                return new ServerLock(channel, lock);
            } catch (IOException e) {
                closeQuietly(channel);
                throw new UncheckedIOException("cannot lock " + path, e);
            } catch (RuntimeException e) {
                closeQuietly(channel);
                throw e;
            }
        }

        void release() {
            closeQuietly(channel); // closing the channel releases the lock
        }

        private static void closeQuietly(FileChannel channel) {
            if (channel != null) {
                try {
                    channel.close();
                } catch (IOException ignored) {
                    // The lock goes with the process anyway.
                }
            }
        }
    }

    private final class ShmRegion implements ExportedRegion {
        private final int serverId;
        private final Path file;
        private final Object fileKey;
        private final Region region;
        private final MappedByteBuffer[] mappings;
        private final boolean fresh;
        private final ServerLock lock;

        ShmRegion(int serverId, Path file, Object fileKey, Region region, MappedByteBuffer[] mappings, boolean fresh, ServerLock lock) {
            this.serverId = serverId;
            this.file = file;
            this.fileKey = fileKey;
            this.region = region;
            this.mappings = mappings;
            this.fresh = fresh;
            this.lock = lock;
        }

        @Override
        public boolean fresh() {
            return fresh;
        }

        @Override
        public void detach() {
            synchronized (ShmFabric.this) {
                stopExporting();
            }
        }

        /** Unmaps and unlocks, once; false when already done. Call under the fabric's monitor. */
        private boolean stopExporting() {
            if (!exported.remove(serverId, this)) {
                return false;
            }
            unmap(mappings);
            if (lock != null) {
                lock.release();
            }
            return true;
        }

        @Override
        public int serverId() {
            return serverId;
        }

        @Override
        public Region region() {
            return region;
        }

        @Override
        public void close() {
            synchronized (ShmFabric.this) {
                if (!stopExporting()) {
                    return;
                }
                try {
                    // Another fabric may have exported this server id since; its file is not ours to delete.
                    if (Objects.equals(fileKey(file), fileKey)) {
                        Files.delete(file);
                    }
                } catch (NoSuchFileException alreadyGone) {
                    // Deleted by someone else: the goal is reached.
                } catch (IOException e) {
                    throw new UncheckedIOException("cannot delete the region file " + file, e);
                }
            }
        }
    }
}
