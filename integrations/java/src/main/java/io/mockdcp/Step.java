package io.mockdcp;

import com.fasterxml.jackson.annotation.JsonValue;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * One step of the scenario vocabulary, as {@code POST /mock/steps} takes it: a JSON object
 * with one member, the step's name, whose value holds its fields ({@code {"persist": {"upto":
 * 40}}}). {@link Steps} makes the common ones; {@link #of} any other; {@link #with} adds a
 * field. Immutable.
 *
 * <p>Field values are JSON values: strings, numbers, booleans, lists and maps. A {@link
 * Duration} is sent as seconds.
 */
public final class Step {

  private final String name;
  private final Map<String, Object> fields;

  private Step(String name, Map<String, Object> fields) {
    this.name = Objects.requireNonNull(name, "name");
    this.fields = Collections.unmodifiableMap(fields);
  }

  /** A step by its name in the vocabulary ({@code mockdcp/scenario/steps.py}) and its fields. */
  public static Step of(String name, Map<String, ?> fields) {
    Map<String, Object> copy = new LinkedHashMap<>();
    fields.forEach((field, value) -> copy.put(field, json(value)));
    return new Step(name, copy);
  }

  /** This step with one more field (or another value for it). */
  public Step with(String field, Object value) {
    Map<String, Object> copy = new LinkedHashMap<>(fields);
    copy.put(field, json(value));
    return new Step(name, copy);
  }

  /** The step's name: {@code set}, {@code failover}, {@code wait}, ... */
  public String name() {
    return name;
  }

  /** The step's fields. */
  public Map<String, Object> fields() {
    return fields;
  }

  /** The step as JSON takes it: {@code {name: fields}}. */
  @JsonValue
  public Map<String, Object> toJson() {
    return Map.of(name, fields);
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof Step s && s.name.equals(name) && s.fields.equals(fields);
  }

  @Override
  public int hashCode() {
    return Objects.hash(name, fields);
  }

  @Override
  public String toString() {
    return "{" + name + ": " + fields + "}";
  }

  private static Object json(Object value) {
    return value instanceof Duration d ? d.toNanos() / 1e9 : value;
  }
}
