package dev.dex.bench;

/** The operations a workload mixes. */
enum Op {
    LOOKUP, UPDATE, INSERT, SCAN, DELETE
}
