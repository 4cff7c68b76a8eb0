package dev.dex.rdma.shm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.extension.AnnotatedElementContext;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.io.TempDirFactory;

/**
 * Puts a {@code @TempDir} on {@code /dev/shm} when the host has it, so tests map tmpfs files as the
 * {@code shm} transport does in production; elsewhere falls back to the default temporary directory.
 */
final class ShmTempDirFactory implements TempDirFactory {
    private static final Path DEV_SHM = Path.of("/dev/shm");

    @Override
    public Path createTempDirectory(AnnotatedElementContext elementContext, ExtensionContext extensionContext)
            throws IOException {
        if (Files.isDirectory(DEV_SHM) && Files.isWritable(DEV_SHM)) {
            return Files.createTempDirectory(DEV_SHM, "dex-test-");
        }
        return Files.createTempDirectory("dex-test-");
    }
}
