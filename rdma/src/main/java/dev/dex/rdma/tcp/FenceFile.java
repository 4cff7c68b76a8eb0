package dev.dex.rdma.tcp;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The identities a memory server fenced, kept in a file beside its region file (which outlives the process), so that a
 * restarted memory node still refuses the compute nodes it fenced before (docs/durability.md). One hexadecimal identity
 * a line, appended and forced to the device before the fence completes, each identity once (a takeover fences the
 * previous owner again and again). A line that is not an identity (a write cut short by a crash) is skipped.
 *
 * <p>Concurrency: {@link #record} may be called by several threads at once; the set of recorded identities is
 * concurrent and each identity is appended by the one thread that added it.
 */
final class FenceFile {
    private static final Logger LOG = LoggerFactory.getLogger(FenceFile.class);

    private final Path file;
    private final Set<Long> recorded = ConcurrentHashMap.newKeySet();

    private FenceFile(Path file) {
        this.file = file;
    }

    /**
     * Opens {@code file} of memory server {@code serverId}; returns it with the identities it holds in {@code fenced}.
     *
     * @throws UncheckedIOException when the file exists but cannot be read
     */
    static FenceFile open(int serverId, Path file, Set<Long> fenced) {
        FenceFile opened = new FenceFile(file);
        if (Files.exists(file)) {
            Set<Long> earlier = new HashSet<>();
            try {
                for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
                    try {
                        earlier.add(Long.parseUnsignedLong(line.strip(), 16));
                    } catch (NumberFormatException partial) {
                        LOG.warn("memory server {}: {} has a line that is no client identity, skipped: '{}'", serverId, file, line);
                    }
                }
            } catch (IOException e) {
                throw new UncheckedIOException("memory server " + serverId + " cannot read its fenced clients in " + file, e);
            }
            opened.recorded.addAll(earlier);
            fenced.addAll(earlier);
            if (!earlier.isEmpty()) {
                LOG.info("memory server {}: {} client(s) fenced by an earlier run stay fenced", serverId, earlier.size());
            }
        }
        return opened;
    }

    /** Appends {@code client} unless it is there already, and forces it to the device. */
    void record(long client) {
        if (!recorded.add(client)) {
            return;
        }
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.APPEND)) {
            channel.write(ByteBuffer.wrap((Long.toHexString(client) + "\n").getBytes(StandardCharsets.UTF_8)));
            channel.force(true);
        } catch (IOException e) {
            recorded.remove(client);
            throw new UncheckedIOException("the fence of client " + Long.toHexString(client) + " could not be recorded in " + file
                    + ", so a restart would forget it", e);
        }
    }
}
