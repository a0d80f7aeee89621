"""The model host: the engine built once per worker process, the model's source and tokenizer,
the adapter that gives the pipelines their ChatModel, and the sentence-embedding model."""
