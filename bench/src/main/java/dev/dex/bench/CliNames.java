package dev.dex.bench;

import java.util.Arrays;
import java.util.function.Function;
import java.util.stream.Collectors;

import picocli.CommandLine.TypeConversionException;

/** Looks enum constants up by their kebab-case CLI names. */
final class CliNames {
    private CliNames() {
    }

    static <E> E find(E[] values, Function<E, String> name, String wanted, String what) {
        for (E value : values) {
            if (name.apply(value).equals(wanted)) {
                return value;
            }
        }
        throw new TypeConversionException("unknown " + what + " '" + wanted + "'; expected one of "
                + Arrays.stream(values).map(name).collect(Collectors.joining(", ")));
    }
}
