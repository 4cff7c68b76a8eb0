package dev.dex.rdma.disni;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Whether this JVM can use the {@code disni} fabric, and if not, why, in words a person can act on. Three
 * things must hold: the kernel has an RDMA device (a NIC, or Soft-RoCE / siw) under
 * {@code /sys/class/infiniband}; the JVM runs with {@code --add-exports java.base/sun.nio.ch=ALL-UNNAMED}
 * (DiSNI reads direct buffer addresses through {@code sun.nio.ch.DirectBuffer}); and {@code libdisni} (with the
 * libibverbs and librdmacm it links) loads from {@code java.library.path}.
 *
 * <p>The answer is worked out once, at first use, and does not change. It never throws: on a machine without
 * RDMA it says so.
 */
public final class RdmaDevices {
    /** Where the kernel lists RDMA devices. */
    static final Path SYSFS_DEVICES = Path.of("/sys/class/infiniband");
    /** The JNI library DiSNI loads. */
    static final String LIBRARY = "disni";
    /** The JVM option DiSNI needs on JDK 9 and later. */
    public static final String ADD_EXPORTS = "--add-exports java.base/sun.nio.ch=ALL-UNNAMED";

    private RdmaDevices() {
    }

    /** True when the {@code disni} fabric can run in this JVM. */
    public static boolean available() {
        return Detected.PROBE.available();
    }

    /**
     * Why the {@code disni} fabric cannot run here (for example
     * {@code "no RDMA device: /sys/class/infiniband is empty"}), or, when it can, which devices it found.
     */
    public static String reason() {
        return Detected.PROBE.reason();
    }

    /** The outcome of one probe. */
    record Probe(boolean available, String reason) {
    }

    /** Something that loads the JNI library or throws {@link UnsatisfiedLinkError}. */
    @FunctionalInterface
    interface LibraryLoader {
        void load();
    }

    /**
     * Probes the three conditions in order and reports the first that fails.
     *
     * @param sysfsDevices  where to look for devices
     * @param sunNioChOpen  whether {@code sun.nio.ch} is exported to DiSNI
     * @param libraryPath   the library path the loader searches, for the message
     * @param loader        loads libdisni
     */
    static Probe probe(Path sysfsDevices, boolean sunNioChOpen, String libraryPath, LibraryLoader loader) {
        List<String> devices;
        if (!Files.isDirectory(sysfsDevices)) {
            return new Probe(false, "no RDMA device: " + sysfsDevices + " does not exist (no RDMA driver is loaded; "
                    + "see docs/rdma-disni.md for Soft-RoCE)");
        }
        try (Stream<Path> entries = Files.list(sysfsDevices)) {
            devices = entries.map(path -> path.getFileName().toString()).sorted().collect(Collectors.toList());
        } catch (IOException e) {
            return new Probe(false, "no RDMA device: " + sysfsDevices + " cannot be listed: " + e.getMessage());
        }
        if (devices.isEmpty()) {
            return new Probe(false, "no RDMA device: " + sysfsDevices + " is empty");
        }
        if (!sunNioChOpen) {
            return new Probe(false, "DiSNI needs the JVM option " + ADD_EXPORTS + " (RDMA devices found: "
                    + String.join(", ", devices) + ")");
        }
        try {
            loader.load();
        } catch (UnsatisfiedLinkError e) {
            String message = String.valueOf(e.getMessage());
            if (message.startsWith("no " + LIBRARY + " in")) {
                return new Probe(false, "libdisni not found on java.library.path (" + libraryPath + "); build it with "
                        + "rdma/native/build-libdisni.sh and run with -Djava.library.path=<its lib directory>");
            }
            return new Probe(false, "libdisni could not be loaded: " + message
                    + " (it needs libibverbs and librdmacm: apt-get install libibverbs1 librdmacm1)");
        }
        return new Probe(true, "RDMA devices " + String.join(", ", devices) + "; libdisni loaded");
    }

    /** The probe of this JVM, run once. */
    private static final class Detected {
        static final Probe PROBE = probe(SYSFS_DEVICES,
                Object.class.getModule().isExported("sun.nio.ch", RdmaDevices.class.getModule()),
                System.getProperty("java.library.path"),
                () -> System.loadLibrary(LIBRARY));
    }
}
