package lakegate.interop;

import static lakegate.interop.Ctx.check;
import static lakegate.interop.Ctx.must;

import java.util.Arrays;
import java.util.Objects;

import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.Schema;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.common.schema.SchemaInfo;
import org.apache.pulsar.common.schema.SchemaType;

/**
 * Schema.AVRO(Pojo.class), Schema.JSON(Pojo.class) and Schema.STRING round
 * trips, and the registered schema as the admin client's schemas API shows it.
 */
final class SchemaScenarios {
    private SchemaScenarios() {}

    /** A record for the AVRO and JSON schemas (public fields, no-arg constructor). */
    public static final class Pojo {
        public String name;
        public int count;
        public double ratio;
        public boolean flag;

        public Pojo() {}

        Pojo(String name, int count, double ratio, boolean flag) {
            this.name = name;
            this.count = count;
            this.ratio = ratio;
            this.flag = flag;
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof Pojo p && Objects.equals(name, p.name) && count == p.count
                && ratio == p.ratio && flag == p.flag;
        }

        @Override
        public int hashCode() {
            return Objects.hash(name, count, ratio, flag);
        }

        @Override
        public String toString() {
            return "Pojo{" + name + "," + count + "," + ratio + "," + flag + "}";
        }
    }

    static void avro(Ctx c) throws Exception {
        roundTrip(c, Schema.AVRO(Pojo.class), SchemaType.AVRO);
    }

    static void json(Ctx c) throws Exception {
        roundTrip(c, Schema.JSON(Pojo.class), SchemaType.JSON);
    }

    static void string(Ctx c) throws Exception {
        String t = c.topic("");
        Producer<String> p = c.keep(c.client.newProducer(Schema.STRING).topic(t).create());
        Consumer<String> cons = c.keep(c.client.newConsumer(Schema.STRING).topic(t).subscriptionName("s")
            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe());
        String[] vals = {"plain", "ünïcødé ✓", ""};
        for (String v : vals) {
            p.send(v);
        }
        for (String v : vals) {
            Message<String> m = must(cons, "string " + v);
            check(v.equals(m.getValue()), "got '%s', want '%s'", m.getValue(), v);
            cons.acknowledge(m);
        }
        SchemaInfo si = c.admin.schemas().getSchemaInfo(t);
        check(si.getType() == SchemaType.STRING, "admin schema type %s, want STRING", si.getType());
    }

    static void roundTrip(Ctx c, Schema<Pojo> schema, SchemaType type) throws Exception {
        String t = c.topic("");
        Producer<Pojo> p = c.keep(c.client.newProducer(schema).topic(t).create());
        Consumer<Pojo> cons = c.keep(c.client.newConsumer(schema).topic(t).subscriptionName("s")
            .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest).subscribe());
        Pojo[] vals = {new Pojo("a", 1, 0.5, true), new Pojo("bé", -7, 1e-9, false), new Pojo("", 0, 0, false)};
        for (Pojo v : vals) {
            p.send(v);
        }
        for (Pojo v : vals) {
            Message<Pojo> m = must(cons, "record " + v);
            check(v.equals(m.getValue()), "got %s, want %s", m.getValue(), v);
            check(m.getSchemaVersion() != null, "message without a schema version");
            cons.acknowledge(m);
        }
        SchemaInfo si = c.admin.schemas().getSchemaInfo(t);
        check(si.getType() == type, "admin schema type %s, want %s", si.getType(), type);
        byte[] want = schema.getSchemaInfo().getSchema();
        check(Arrays.equals(si.getSchema(), want), "admin schema definition %s, the client registered %s",
            si.getSchemaDefinition(), schema.getSchemaInfo().getSchemaDefinition());
        // A consumer with an incompatible schema is refused.
        try {
            c.keep(c.client.newConsumer(Schema.INT64).topic(t).subscriptionName("bad").subscribe());
            check(false, "an INT64 consumer was accepted on a %s topic", type);
        } catch (org.apache.pulsar.client.api.PulsarClientException.IncompatibleSchemaException expected) {
            // as Pulsar
        }
    }
}
