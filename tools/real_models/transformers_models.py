"""Real architectures from Hugging Face transformers, each built from its own config class with
small sizes (one or two layers, hidden sizes of 16-64) and random weights: nothing is downloaded.
Each exercises one issue-39 kind (`spec.py`); the description says where in the model it is."""

from __future__ import annotations

from typing import Any

import torch

from .spec import COMPLEX_FFT, DATA_DEPENDENT, RANDOM_OPS, TOPK_TIES, Built, Spec

PACKAGE = "transformers"


def _untyped(**kwargs: Any) -> dict[str, Any]:
    """Config keywords the config class takes through `**kwargs` (PreTrainedConfig's, or the
    backbone mixin's), which its typed signature does not list."""
    return kwargs


def _ids(vocab: int, length: int, batch: int = 1, low: int = 3) -> torch.Tensor:
    """Token ids in [low, vocab): ids below `low` are the special tokens (pad/bos/eos)."""
    return torch.randint(low, vocab, (batch, length))


def reformer(attn_layers: tuple[str, ...]) -> Built:
    """ReformerModel with axial position embeddings (the default): in eval mode
    `AxialPositionEmbeddings` slices its weights by `position_ids.max().item()` columns."""
    from transformers import ReformerConfig, ReformerModel

    config = ReformerConfig(
        vocab_size=64,
        hidden_size=32,
        num_attention_heads=2,
        attention_head_size=16,
        feed_forward_size=64,
        attn_layers=list(attn_layers),
        axial_pos_shape=(4, 8),
        axial_pos_embds_dim=(16, 16),
        max_position_embeddings=32,
        local_attn_chunk_length=8,
        lsh_attn_chunk_length=8,
        num_buckets=4,
        num_hashes=1,
        hash_seed=0 if "lsh" in attn_layers else None,
        is_decoder=False,
        pad_token_id=0,
    )
    model = ReformerModel(config).eval()
    return model, (), {"input_ids": _ids(64, 32), "use_cache": False}


def vits() -> Built:
    """VitsModel (MMS-TTS layout: stochastic duration predictor) with noise_scale and
    noise_scale_duration 0, so the waveform is a function of the text: the duration predictor's
    output sets the spectrogram length (`predicted_lengths.max()`)."""
    from transformers import VitsConfig, VitsModel

    config = VitsConfig(
        vocab_size=38,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        ffn_dim=64,
        flow_size=16,
        spectrogram_bins=33,
        upsample_initial_channel=32,
        upsample_rates=(4, 4),
        upsample_kernel_sizes=(8, 8),
        resblock_kernel_sizes=(3,),
        resblock_dilation_sizes=((1, 3),),
        duration_predictor_num_flows=2,
        duration_predictor_filter_channels=32,
        prior_encoder_num_flows=2,
        prior_encoder_num_wavenet_layers=2,
        posterior_encoder_num_wavenet_layers=2,
        depth_separable_num_layers=2,
        noise_scale=0.0,
        noise_scale_duration=0.0,
    )
    model = VitsModel(config).eval()
    ids = _ids(38, 12, low=1)
    return model, (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def idefics3() -> Built:
    """Idefics3ForConditionalGeneration (SigLIP-style vision tower, pixel-shuffle connector, Llama
    text model), 2 images of 32x32 in 8x8 patches: 4 image tokens each after the shuffle. Padding
    images are dropped by a boolean mask (`pixel_values[real_images_inds]`) and image features
    are scattered to the image-token positions."""
    from transformers import Idefics3Config, Idefics3ForConditionalGeneration

    image_token = 60
    config = Idefics3Config(
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
        },
        text_config={
            "model_type": "llama",
            "vocab_size": 64,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 64,
            "pad_token_id": 0,
        },
        scale_factor=2,
        image_token_id=image_token,
    )
    model = Idefics3ForConditionalGeneration(config).eval()
    text = _ids(image_token, 6)
    image = torch.full((1, 4), image_token)
    ids = torch.cat([text[:, :2], image, text[:, 2:4], image, text[:, 4:]], dim=1)
    pixels = torch.rand(1, 2, 3, 32, 32)
    mask = torch.ones(1, 2, 32, 32, dtype=torch.bool)
    kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "pixel_values": pixels}
    return model, (), {**kwargs, "pixel_attention_mask": mask, "use_cache": False}


def idefics3_one_image(built: Built) -> list[Any]:
    """The example with its second image a padding image (all zeros, its tokens text): one real image."""
    kwargs = built[2]
    ids, pixels = kwargs["input_ids"].clone(), kwargs["pixel_values"].clone()
    ids[:, 8:12] = 5
    pixels[:, 1] = 0
    names = ("input_ids", "attention_mask", "pixel_attention_mask")
    return [{"pixel_values": pixels, **{n: kwargs[n] for n in names}, "input_ids": ids}]


def fnet() -> Built:
    """FNetModel: token mixing is `torch.fft.fftn(...).real` over the sequence and hidden axes."""
    from transformers import FNetConfig, FNetModel

    config = FNetConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=2,
        intermediate_size=64,
        max_position_embeddings=64,
        use_tpu_fourier_optimizations=False,
    )
    model = FNetModel(config).eval()
    ids = _ids(64, 16)
    return model, (), {"input_ids": ids, "token_type_ids": torch.zeros_like(ids)}


def informer() -> Built:
    """InformerModel with ProbSparse attention: `torch.randint` samples the keys that rank the
    queries; with a 12-step context every query is kept (u = L_Q), so the outputs do not depend
    on the draws. Without distillation: with it, torch.export fails inside transformers (traced,
    `create_bidirectional_mask` builds a 12x12 mask that the encoder keeps after its conv layer
    halves the sequence; eager skips the mask)."""
    from transformers import InformerConfig, InformerModel

    lags = [1, 2, 3]
    config = InformerConfig(
        prediction_length=6,
        context_length=12,
        input_size=1,
        lags_sequence=lags,
        num_time_features=2,
        d_model=16,
        encoder_layers=2,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        attention_type="prob",
        distil=False,  # distil=True does not export: traced, the encoder keeps its 12x12 mask after halving
    )
    model = InformerModel(config).eval()
    past = 12 + max(lags)
    kwargs = {
        "past_values": torch.rand(1, past) * 10,
        "past_time_features": torch.rand(1, past, 2),
        "past_observed_mask": torch.ones(1, past),
        "future_values": torch.rand(1, 6) * 10,
        "future_time_features": torch.rand(1, 6, 2),
        "use_cache": False,
    }
    return model, (), kwargs


def speecht5() -> Built:
    """SpeechT5ForTextToSpeech (text encoder, speech decoder, postnet) on text ids and an 8-frame
    mel spectrogram; its speech-decoder prenet keeps dropout on in eval (`_consistent_dropout`,
    `torch.bernoulli`, p = 0.5 as in the released config), so its outputs depend on the draws."""
    from transformers import SpeechT5Config, SpeechT5ForTextToSpeech

    config = SpeechT5Config(
        vocab_size=40,
        hidden_size=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        num_mel_bins=8,
        speech_decoder_prenet_units=32,
        speaker_embedding_dim=16,
        speech_decoder_postnet_layers=2,
        speech_decoder_postnet_units=32,
        max_text_positions=64,
        max_speech_positions=64,
        encoder_max_relative_position=16,
    )
    model = SpeechT5ForTextToSpeech(config).eval()
    ids = _ids(40, 10)
    kwargs = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "decoder_input_values": torch.randn(1, 8, 8),
        "speaker_embeddings": torch.randn(1, 16),
        "use_cache": False,
    }
    return model, (), kwargs


def rt_detr() -> Built:
    """RTDetrForObjectDetection with a small ResNet backbone (random init, no pretrained download),
    one encoder and one decoder layer, 300 queries, on a 512x512 image: the query selection is a
    `topk` over the encoder's anchor scores, where anchors masked out at the border share one
    score (ties)."""
    from transformers import RTDetrConfig, RTDetrForObjectDetection, RTDetrResNetConfig

    backbone = RTDetrResNetConfig(
        embedding_size=16,
        hidden_sizes=[16, 32, 64, 128],
        depths=[1, 1, 1, 1],
        layer_type="basic",
        **_untyped(out_features=["stage2", "stage3", "stage4"]),
    )
    config = RTDetrConfig(
        backbone_config=backbone,
        encoder_hidden_dim=32,
        encoder_in_channels=[32, 64, 128],
        encoder_ffn_dim=64,
        encoder_attention_heads=2,
        d_model=32,
        decoder_in_channels=[32, 32, 32],
        decoder_ffn_dim=64,
        decoder_attention_heads=2,
        decoder_layers=1,
        num_queries=300,
        **_untyped(use_pretrained_backbone=False, num_labels=8),
    )
    model = RTDetrForObjectDetection(config).eval()
    return model, (), {"pixel_values": torch.rand(1, 3, 512, 512)}


SPECS = [
    Spec(
        "reformer",
        PACKAGE,
        __name__,
        DATA_DEPENDENT,
        "ReformerModel, local attention x2, axial position embeddings (slice by position_ids.max().item()); 32 ids",
        lambda: reformer(("local", "local")),
    ),
    Spec(
        "reformer-lsh",
        PACKAGE,
        __name__,
        DATA_DEPENDENT,
        "ReformerModel, local + LSH attention (hash_seed=0), axial position embeddings; 32 ids",
        lambda: reformer(("local", "lsh")),
    ),
    Spec(
        "vits",
        PACKAGE,
        __name__,
        DATA_DEPENDENT,
        "VitsModel, stochastic duration predictor, noise scales 0 (length from predicted durations); 12 ids",
        vits,
    ),
    Spec(
        "idefics3",
        PACKAGE,
        __name__,
        DATA_DEPENDENT,
        "Idefics3ForConditionalGeneration, SigLIP 32px/8px + Llama 1 layer; 2 images, 8 image tokens, 14 ids",
        idefics3,
        verify_sets=idefics3_one_image,
    ),
    Spec("fnet", PACKAGE, __name__, COMPLEX_FFT, "FNetModel, 2 layers, hidden 32 (fftn, complex64); 16 ids", fnet),
    Spec(
        "informer",
        PACKAGE,
        __name__,
        RANDOM_OPS,
        "InformerModel, ProbSparse attention (randint; every query kept), no distil, context 12, prediction 6",
        informer,
    ),
    Spec(
        "speecht5-tts",
        PACKAGE,
        __name__,
        RANDOM_OPS,
        "SpeechT5ForTextToSpeech, prenet bernoulli p=0.5 in eval (outputs depend on draws); 10 ids, 8 mel frames",
        speecht5,
    ),
    Spec(
        "rt-detr",
        PACKAGE,
        __name__,
        TOPK_TIES,
        "RTDetrForObjectDetection, ResNet-basic [1,1,1,1] backbone, d_model 32, 300 queries; 512x512 image",
        rt_detr,
    ),
]
