package dev.dex.ycsb;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * {@code bin/dex ycsb load|run [YCSB options]}: YCSB's client ({@code site.ycsb.Client}) with the DEX binding, e.g.
 * {@code bin/dex ycsb load -P ycsb/workloads/workloada -p dex.seed=127.0.0.1:2551}. {@code load} inserts the records,
 * {@code run} runs the workload's operations; every other option is YCSB's ({@code -P}, {@code -p}, {@code -threads},
 * {@code -s}, ...).
 */
public final class YcsbMain {
    private YcsbMain() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || !args[0].equals("load") && !args[0].equals("run")) {
            System.err.println("usage: dex ycsb load|run -P WORKLOAD -p dex.seed=HOST:PORT [YCSB options]"
                    + " (docs/ycsb.md; workloads in ycsb/workloads)");
            System.exit(2);
        }
        List<String> ycsb = new ArrayList<>(List.of(args[0].equals("load") ? "-load" : "-t", "-db", DexYcsbClient.class.getName()));
        ycsb.addAll(Arrays.asList(args).subList(1, args.length));
        site.ycsb.Client.main(ycsb.toArray(String[]::new));
    }
}
