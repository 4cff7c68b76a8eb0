package dev.dex.bench;

import java.util.Locale;

import picocli.CommandLine.ITypeConverter;
import picocli.CommandLine.TypeConversionException;

/** Reads counts such as {@code 1000000}, {@code 1_000_000} or {@code 1m} (suffixes k, m, g: powers of 1000). */
public final class CountConverter implements ITypeConverter<Long> {

    @Override
    public Long convert(String value) {
        return parse(value);
    }

    /**
     * The count {@code value} spells.
     *
     * @throws TypeConversionException when it is not a count
     */
    public static long parse(String value) {
        String s = value.strip().replace("_", "").toLowerCase(Locale.ROOT);
        long scale = 1;
        if (!s.isEmpty()) {
            switch (s.charAt(s.length() - 1)) {
                case 'k' -> scale = 1_000L;
                case 'm' -> scale = 1_000_000L;
                case 'g' -> scale = 1_000_000_000L;
                default -> scale = 1;
            }
        }
        if (scale != 1) {
            s = s.substring(0, s.length() - 1);
        }
        try {
            return Math.multiplyExact(Long.parseLong(s), scale);
        } catch (NumberFormatException | ArithmeticException e) {
            throw new TypeConversionException("'" + value
                    + "' is not a count (digits, optionally with _ separators and a k, m or g suffix)");
        }
    }
}
