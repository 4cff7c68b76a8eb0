package dev.dex.multijvm;

/**
 * {@link ScaleOutIT} on the tcp fabric: the memory node serves its region over loopback TCP, the bulk load from this
 * JVM and every compute node reach it through the endpoint it advertises, and no node JVM shares memory with
 * another (each is given an shm directory of its own that must never come to exist; cleanup checks).
 */
class ScaleOutTcpIT extends ScaleOutIT {
    @Override
    ClusterHarness newHarness(String... settings) {
        return ClusterHarness.tcp(settings);
    }
}
