"""What discovery found, as a document and its outputs: the report's models (JSON), the names
it gives, the draft DBC (cantools) and the HTML evidence page. The lowest part of discovery:
it imports neither the analysis nor the live tools."""
