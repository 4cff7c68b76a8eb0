package dev.dex.rdma.disni;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RdmaDevicesTest {
    private static final RdmaDevices.LibraryLoader LOADS = () -> { };
    private static final RdmaDevices.LibraryLoader MISSING = () -> {
        throw new UnsatisfiedLinkError("no disni in java.library.path: /usr/lib");
    };

    @TempDir
    Path sysfs;

    @Test
    void missingSysfsDirectoryMeansNoDevice() {
        RdmaDevices.Probe probe = RdmaDevices.probe(sysfs.resolve("infiniband"), true, "/usr/lib", LOADS);

        assertFalse(probe.available());
        assertTrue(probe.reason().startsWith("no RDMA device: " + sysfs.resolve("infiniband") + " does not exist"), probe.reason());
    }

    @Test
    void emptySysfsDirectoryMeansNoDevice() {
        RdmaDevices.Probe probe = RdmaDevices.probe(sysfs, true, "/usr/lib", LOADS);

        assertEquals(new RdmaDevices.Probe(false, "no RDMA device: " + sysfs + " is empty"), probe);
    }

    @Test
    void deviceWithoutTheAddExportsOptionSaysWhichOption() throws IOException {
        Files.createDirectory(sysfs.resolve("rxe0"));
        AtomicInteger loads = new AtomicInteger();

        RdmaDevices.Probe probe = RdmaDevices.probe(sysfs, false, "/usr/lib", loads::incrementAndGet);

        assertFalse(probe.available());
        assertTrue(probe.reason().contains("--add-exports java.base/sun.nio.ch=ALL-UNNAMED"), probe.reason());
        assertTrue(probe.reason().contains("rxe0"), probe.reason());
        assertEquals(0, loads.get(), "the library is not loaded when DiSNI could not run anyway");
    }

    @Test
    void deviceWithoutLibdisniSaysWhereItLookedAndHowToBuildIt() throws IOException {
        Files.createDirectory(sysfs.resolve("mlx5_0"));

        RdmaDevices.Probe probe = RdmaDevices.probe(sysfs, true, "/opt/dex/lib:/usr/lib", MISSING);

        assertFalse(probe.available());
        assertTrue(probe.reason().startsWith("libdisni not found on java.library.path (/opt/dex/lib:/usr/lib)"), probe.reason());
        assertTrue(probe.reason().contains("rdma/native/build-libdisni.sh"), probe.reason());
    }

    @Test
    void libdisniWithoutItsVerbsLibrariesSaysWhatIsMissing() throws IOException {
        Files.createDirectory(sysfs.resolve("mlx5_0"));

        RdmaDevices.Probe probe = RdmaDevices.probe(sysfs, true, "/opt", () -> {
            throw new UnsatisfiedLinkError("/opt/libdisni.so: libibverbs.so.1: cannot open shared object file");
        });

        assertFalse(probe.available());
        assertTrue(probe.reason().contains("libibverbs.so.1: cannot open shared object file"), probe.reason());
        assertTrue(probe.reason().contains("apt-get install libibverbs1 librdmacm1"), probe.reason());
    }

    @Test
    void deviceOptionAndLibraryMakeItAvailable() throws IOException {
        Files.createDirectory(sysfs.resolve("rxe0"));
        Files.createDirectory(sysfs.resolve("mlx5_1"));

        RdmaDevices.Probe probe = RdmaDevices.probe(sysfs, true, "/opt", LOADS);

        assertEquals(new RdmaDevices.Probe(true, "RDMA devices mlx5_1, rxe0; libdisni loaded"), probe);
    }

    @Test
    void thisJvmsAnswerComesWithAReason() {
        assertFalse(RdmaDevices.reason().isBlank());
        assertEquals(RdmaDevices.available(), RdmaDevices.reason().startsWith("RDMA devices "), RdmaDevices.reason());
    }
}
