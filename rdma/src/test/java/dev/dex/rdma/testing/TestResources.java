package dev.dex.rdma.testing;

import java.util.ArrayList;
import java.util.List;

import org.agrona.CloseHelper;

/**
 * What a test opened (fabrics, regions, connections, engines), closed after it in the reverse order of
 * opening, also when it failed. A test class holds one in a JUnit {@code @AutoClose} field.
 */
public final class TestResources implements AutoCloseable {
    private final List<AutoCloseable> resources = new ArrayList<>();

    /** Closes {@code resource} after the test, before everything opened earlier; answers it. */
    public <T extends AutoCloseable> T closeAfter(T resource) {
        resources.add(0, resource);
        return resource;
    }

    /** Closes everything, every resource even when one fails (the first failure is thrown). */
    @Override
    public void close() {
        CloseHelper.closeAll(resources);
        resources.clear();
    }
}
