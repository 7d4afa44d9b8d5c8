"""A reply's vector holds the turn it answers (``embedding.reply_context``), so it must not outlive
that turn's text: when the turn before a memory is deleted (the link is set to null by the foreign
key, whichever path deletes) or when the link changes, the memory's vectors are deleted and it is
pending again; when a turn's text is edited, so are those of its first reply (the only memory
``reply_context`` gives a turn to: an edit costs one embedding more at most). The worker's sweep
embeds them anew. Done by the database, so the service, a command, an erasure, retention and a raw
statement all reach it. A row lock taken for the change waits for a worker embedding that reply,
so a vector made from the text before is deleted after that worker commits, not before.
"""

from django.db import migrations

TRIGGERS = """
CREATE FUNCTION memory_reply_vectors_link_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memories_memoryembedding WHERE memory_id = NEW.id;
    NEW.embedding_status := 'pending';
    RETURN NEW;
END $$;
CREATE TRIGGER memory_reply_vectors_link_changed
    BEFORE UPDATE OF thread_previous_id ON memories_memory
    FOR EACH ROW WHEN (OLD.thread_previous_id IS DISTINCT FROM NEW.thread_previous_id)
    EXECUTE FUNCTION memory_reply_vectors_link_changed();

-- The first memory linked to the edited turn, the one reply ``reply_context`` gives it to. Its row
-- first: a worker embedding it holds that row until it commits, and the delete after (a statement
-- of its own, with a snapshot taken after that wait) then removes the vector made from the text
-- before the edit.
CREATE FUNCTION memory_reply_vectors_turn_edited() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    reply uuid;
BEGIN
    SELECT id INTO reply FROM memories_memory WHERE thread_previous_id = NEW.id ORDER BY created_at, id LIMIT 1;
    IF reply IS NOT NULL THEN
        UPDATE memories_memory SET embedding_status = 'pending' WHERE id = reply;
        DELETE FROM memories_memoryembedding WHERE memory_id = reply;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER memory_reply_vectors_turn_edited
    AFTER UPDATE OF text ON memories_memory
    FOR EACH ROW WHEN (OLD.text IS DISTINCT FROM NEW.text)
    EXECUTE FUNCTION memory_reply_vectors_turn_edited();
"""

DROP = """
DROP TRIGGER memory_reply_vectors_turn_edited ON memories_memory;
DROP FUNCTION memory_reply_vectors_turn_edited();
DROP TRIGGER memory_reply_vectors_link_changed ON memories_memory;
DROP FUNCTION memory_reply_vectors_link_changed();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0020_thread_previous"),
    ]

    operations = [migrations.RunSQL(sql=TRIGGERS, reverse_sql=DROP)]
