package io.mockdcp;

import static org.junit.jupiter.api.Assertions.fail;

import com.couchbase.client.dcp.Client;
import com.couchbase.client.dcp.StreamFrom;
import com.couchbase.client.dcp.StreamTo;
import com.couchbase.client.dcp.highlevel.DatabaseChangeListener;
import com.couchbase.client.dcp.highlevel.Deletion;
import com.couchbase.client.dcp.highlevel.DocumentChange;
import com.couchbase.client.dcp.highlevel.Mutation;
import com.couchbase.client.dcp.highlevel.Rollback;
import com.couchbase.client.dcp.highlevel.StreamFailure;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

/**
 * A consumer under test: java-dcp-client streaming every vbucket of a mockdcp bucket from the
 * beginning, keeping each key's versions and undoing the versions a rollback removes (as a
 * correct consumer does), so that {@link #documents()} is what it holds.
 */
final class DcpCollector implements AutoCloseable {

  private record Version(int vbucket, long seqno, String value) {}

  private final Client client;
  /** Each key's versions, oldest first; a null value is a deletion. */
  private final Map<String, List<Version>> versions = new TreeMap<>();
  private final AtomicInteger rollbacks = new AtomicInteger();
  private final List<Throwable> failures = new CopyOnWriteArrayList<>();

  private DcpCollector(Client client) {
    this.client = client;
  }

  /** Streams the plain KV port. */
  static DcpCollector start(MockDcpServer server) {
    return start(server, false);
  }

  /** Streams the TLS port when {@code tls}, trusting the server's CA (hostname verified). */
  static DcpCollector start(MockDcpServer server, boolean tls) {
    Client.Builder builder = Client.builder()
        .seedNodes(tls ? server.host() + ":" + server.tlsPort() : server.seedNode())
        .credentials(server.username(), server.password())
        .bucket(server.bucket())
        .bootstrapTimeout(Duration.ofSeconds(20));
    if (tls) {
      builder.securityConfig(security -> security.enableTls(true)
          .trustCertificates(List.of(server.caCertificate())));
    }
    DcpCollector collector = new DcpCollector(builder.build());
    collector.client.nonBlockingListener(collector.new Listener());
    collector.client.connect().block(Duration.ofSeconds(30));
    collector.client.initializeState(StreamFrom.BEGINNING, StreamTo.INFINITY).block();
    collector.client.startStreaming().block(Duration.ofSeconds(30));
    return collector;
  }

  private final class Listener implements DatabaseChangeListener {
    @Override
    public void onMutation(Mutation mutation) {
      record(mutation, new String(mutation.getContent(), StandardCharsets.UTF_8));
    }

    @Override
    public void onDeletion(Deletion deletion) {
      record(deletion, null);
    }

    @Override
    public void onRollback(Rollback rollback) {
      rollbacks.incrementAndGet();
      synchronized (versions) {
        for (List<Version> list : versions.values()) {
          list.removeIf(v -> v.vbucket() == rollback.getVbucket() && v.seqno() > rollback.getSeqno());
        }
      }
      rollback.resume();
    }

    @Override
    public void onFailure(StreamFailure failure) {
      failures.add(failure.getCause());
    }
  }

  private void record(DocumentChange change, String value) {
    Version version = new Version(change.getVbucket(), change.getOffset().getSeqno(), value);
    synchronized (versions) {
      versions.computeIfAbsent(change.getKey(), k -> new ArrayList<>()).add(version);
    }
  }

  /** The documents the consumer holds: each key's latest version, unless deleted. */
  Map<String, String> documents() {
    Map<String, String> out = new TreeMap<>();
    synchronized (versions) {
      versions.forEach((key, list) -> {
        if (!list.isEmpty() && list.get(list.size() - 1).value() != null) {
          out.put(key, list.get(list.size() - 1).value());
        }
      });
    }
    return out;
  }

  int rollbacks() {
    return rollbacks.get();
  }

  /** Waits until the consumer holds exactly {@code expected}; fails with the difference. */
  void awaitDocuments(Map<String, String> expected, Duration timeout) throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!documents().equals(expected)) {
      if (!failures.isEmpty()) {
        fail("the DCP client failed: " + failures);
      }
      if (System.nanoTime() > deadline) {
        Map<String, String> held = documents();
        TreeSet<String> missing = new TreeSet<>(expected.keySet());
        missing.removeAll(held.keySet());
        TreeSet<String> extra = new TreeSet<>(held.keySet());
        extra.removeAll(expected.keySet());
        long wrong = expected.keySet().stream()
            .filter(k -> held.containsKey(k) && !held.get(k).equals(expected.get(k))).count();
        fail("after " + timeout + " the consumer holds " + held.size() + " documents, expected "
            + expected.size() + ": missing " + first(missing) + ", extra " + first(extra)
            + ", " + wrong + " with another value");
      }
      Thread.sleep(50);
    }
  }

  /** The oracle's documents of the default collection, key to value. */
  static Map<String, String> expected(MockDcpServer server) {
    return server.control().oracle().stream()
        .filter(row -> row.keyspace().equals("_default._default"))
        .collect(Collectors.toMap(OracleRow::key, OracleRow::value, (a, b) -> b, TreeMap::new));
  }

  private static String first(TreeSet<String> keys) {
    return keys.size() + (keys.isEmpty() ? "" : " " + keys.stream().limit(5).toList());
  }

  @Override
  public void close() {
    client.disconnect().block(Duration.ofSeconds(10));
  }
}
