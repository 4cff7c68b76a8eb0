package dev.dex.bench;

/** Runs {@link BenchCommand} as {@code dex bench} and exits with its exit code. */
public final class BenchMain {
    private BenchMain() {
    }

    public static void main(String[] args) {
        int exitCode = BenchCommand.commandLine().setCommandName("dex bench").execute(args);
        System.exit(exitCode);
    }
}
